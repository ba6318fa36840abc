/* The candidate kernel contract lives in kernels/kernel_abi.h (with the kernel sources that
 * implement it); this header forwards to it for reward/'s sources. */
#include "kernels/kernel_abi.h"
