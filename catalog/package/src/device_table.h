// Which of the catalog's device tables serves a GPU, by its name (cudaDeviceProp::name, the name
// the evaluator stored with every measurement): a pure function, no CUDA, so that the choice is
// tested without a GPU (tests/unit/test_catalog.cpp includes this file). It does not read the
// environment or the device; kernelrl_catalog.cpp does, and caches the answer per CUDA device.
//
// Only an exact name matches (surrounding spaces aside): a winner chosen on one card is not the
// best on another (an H100's winners read 1.00-1.07x on an H200 against 1.12-1.16x stored, issue
// 41), and "NVIDIA H100 PCIe" differs from "NVIDIA H100 80GB HBM3" in clocks and bandwidth. A
// name the catalog lacks gets no table: every shape goes to cuBLASLt.
#ifndef KERNELRL_CATALOG_DEVICE_TABLE_H
#define KERNELRL_CATALOG_DEVICE_TABLE_H

#include <cstring>

namespace kernelrl_catalog_detail {

// `name` without leading and trailing spaces, as [*begin, *end).
inline void trim_name(const char* name, const char** begin, const char** end) {
  const char* b = name;
  while (*b == ' ' || *b == '\t') ++b;
  const char* e = b + std::strlen(b);
  while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) --e;
  *begin = b;
  *end = e;
}

// The index in `tables` (the catalog's device names) of `device`'s table, or -1 for none.
inline int device_table_for(const char* device, const char* const* tables, int n_tables) {
  if (!device) return -1;
  const char *db, *de;
  trim_name(device, &db, &de);
  if (db == de) return -1;
  for (int i = 0; i < n_tables; ++i) {
    const char *tb, *te;
    trim_name(tables[i], &tb, &te);
    if (te - tb == de - db && std::memcmp(tb, db, static_cast<size_t>(de - db)) == 0) return i;
  }
  return -1;
}

}  // namespace kernelrl_catalog_detail

#endif  // KERNELRL_CATALOG_DEVICE_TABLE_H
