// AVX2+FMA twins of the scalar reference kernels (kernels_scalar.cpp): same bits, faster.
// Types without a twin here run the scalar kernel on this path.
#include "ops/kernels.h"

namespace ember::ops::detail {

const KernelTable& avx2_kernels() {
  static const KernelTable table = [] {
    KernelTable t = scalar_kernels();
    return t;
  }();
  return table;
}

}  // namespace ember::ops::detail
