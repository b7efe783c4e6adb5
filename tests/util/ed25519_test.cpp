// Ed25519 through OpenSSL: sign/verify round trip, and every way a signature can be wrong is
// refused (another message, another key, a flipped bit, malformed hex); key files of another
// kind are refused naming the file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/ed25519.h"
#include "util/error.h"

namespace ember {
namespace {

TEST(Ed25519, SignVerifyAndEveryTamperingIsRefused) {
  const std::string dir = test::temp_dir("ed25519");
  ed25519_generate(dir + "/k.pem", dir + "/k.pub.pem", false);
  ed25519_generate(dir + "/o.pem", dir + "/o.pub.pem", false);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/k.pem").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THROW(ed25519_generate(dir + "/k.pem", dir + "/k2.pub.pem", false), Error);  // no --force

  const Ed25519Signature sig = ed25519_sign(dir + "/k.pem", "ember.seal.v1:abc");
  EXPECT_EQ(sig.public_key, ed25519_public_key(dir + "/k.pub.pem"));
  EXPECT_EQ(sig.public_key.size(), 64u);
  EXPECT_EQ(sig.value.size(), 128u);
  EXPECT_TRUE(ed25519_verify(sig, "ember.seal.v1:abc"));
  EXPECT_FALSE(ed25519_verify(sig, "ember.seal.v1:abd"));
  Ed25519Signature other_key = sig;
  other_key.public_key = ed25519_public_key(dir + "/o.pub.pem");
  EXPECT_FALSE(ed25519_verify(other_key, "ember.seal.v1:abc"));
  Ed25519Signature flipped = sig;
  flipped.value[10] = flipped.value[10] == '0' ? '1' : '0';
  EXPECT_FALSE(ed25519_verify(flipped, "ember.seal.v1:abc"));
  for (const std::string& bad : {std::string(""), std::string(127, 'a'), std::string(128, 'g'), std::string(128, 'A')}) {
    Ed25519Signature b = sig;
    b.value = bad;
    EXPECT_FALSE(ed25519_verify(b, "ember.seal.v1:abc"));
  }
  // A public key where a private one is expected (and the other way round), and a non-key.
  write_file_atomic(dir + "/junk.pem", "not a key\n", false);
  for (const std::string& f : {dir + "/k.pub.pem", dir + "/junk.pem"}) {
    try {
      ed25519_sign(f, "m");
      ADD_FAILURE() << f << " accepted as a private key";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(f + ": key: expected an Ed25519 private key", 0), 0u) << e.what();
    }
  }
  EXPECT_THROW(ed25519_public_key(dir + "/k.pem"), Error);
}

}  // namespace
}  // namespace ember
