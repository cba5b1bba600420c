// The `looptune._core` functions behind looptune.load_library's calls (kernel_call.cpp).
#pragma once

#include <pybind11/pybind11.h>

/// Adds _sgemm and _sconv2d to the module.
void bind_kernel_calls(pybind11::module_ &m);
