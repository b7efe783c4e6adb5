// Every command that reads a state takes a store reference (STORE_URI#NAMESPACE/NAME or
// STORE_URI#SEAL) where it takes a directory or a .kvc (store/open_state.h): the state is read
// and verified by the store's get, once, and a kind the command does not accept is refused.
#include <gtest/gtest.h>

#include "support/cli_run.h"
#include "support/test_support.h"

namespace ember::test {
namespace {

TEST(StoreRefCli, ReplayCompareAndExportReadAStoredStateByReference) {
  const std::string model = shared_path("models/stories260K.gguf");
  const std::string dir = temp_dir("store-ref");
  const std::string snap = dir + "/snap", uri = "dir:" + dir + "/s";
  ASSERT_EQ(run_ember("kv export --model " + q(model) + " --prompt 'Once upon a time there was a dog' --output " +
                      q(snap)).rc, 0);
  CliRun put = run_ember("store put " + q(uri) + " " + q(snap) + " --name dog");
  ASSERT_EQ(put.rc, 0) << put.out;
  const size_t at = put.out.find("name ");
  ASSERT_NE(at, std::string::npos) << put.out;
  const std::string name = put.out.substr(at + 5, put.out.find('\n', at) - at - 5);
  const std::string seal = put.out.substr(put.out.find("seal ") + 5, 64);

  // kv replay from the store equals kv replay from the directory, by name and by seal.
  const CliRun from_dir = run_ember("kv replay --snapshot " + q(snap) + " --model " + q(model) + " -n 6 --ignore-eos");
  ASSERT_EQ(from_dir.rc, 0) << from_dir.out;
  for (const std::string& ref : {uri + "#" + name, uri + "#" + seal}) {
    const CliRun r = run_ember("kv replay --snapshot " + q(ref) + " --model " + q(model) + " -n 6 --ignore-eos");
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(r.out, from_dir.out) << ref;
  }
  // kv compare: the stored state is the directory's, identical.
  CliRun c = run_ember("kv compare --json " + q(snap) + " " + q(uri + "#" + name));
  ASSERT_EQ(c.rc, 0) << c.out;
  EXPECT_TRUE(parse_report(c)["summary"]["identical"].get<bool>());
  // kv export-llamacpp reads it too.
  EXPECT_EQ(run_ember("kv export-llamacpp " + q(uri + "#" + name) + " -o " + q(dir + "/s.seq")).rc, 0);
  // A name that is not there, and a store holding no mapped caches.
  c = run_ember("kv replay --snapshot " + q(uri + "#" + name.substr(0, name.find('/')) + "/cat") + " --model " +
                q(model));
  EXPECT_EQ(c.rc, 2) << c.out;
  EXPECT_NE(c.out.find("expected a stored name"), std::string::npos) << c.out;
  c = run_ember("map replay --mapped " + q(uri + "#" + name) + " --model " + q(model));
  EXPECT_EQ(c.rc, 2) << c.out;
  EXPECT_NE(c.out.find("a store holds native snapshots only"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace ember::test
