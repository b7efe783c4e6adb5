#pragma once
// A fresh store per test on each backend: dir: under a temporary directory, or a real
// redis-server the fixture starts (redis_server.h) and stops. Parameterized by "dir" | "redis".
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "store/redis_server.h"
#include "store/store.h"
#include "support/test_support.h"

namespace ember::store {

class StoreFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("store");
    if (GetParam() == "redis") {
      server_ = std::make_unique<test::RedisServer>(dir_);
      uri_ = server_->uri();
    } else {
      uri_ = "dir:" + dir_ + "/s";
    }
  }
  Store open() { return Store::open(uri_); }
  // Writes raw bytes at a key, the way a corrupting or hostile party would.
  void poke(const std::string& key, const std::string& value) { open().backend().replace(key, value); }

  std::string dir_, uri_;
  std::unique_ptr<test::RedisServer> server_;
};

}  // namespace ember::store
