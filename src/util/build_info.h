#pragma once
// Which source this binary was built from (cmake/build_info.cmake writes the definitions at
// build time). llama.cpp's meanings, so `ember bench` fills llama-bench's build_commit and
// build_number alike.
namespace ember {

// The short git hash of the source tree's HEAD; "unknown" when built outside a git checkout.
const char* build_commit();
// The number of commits up to HEAD (`git rev-list --count HEAD`); 0 outside a checkout.
int build_number();

}  // namespace ember
