// This machine's figures (util/machine.h) with its measured single-core peak: what the
// observation's machine vector and the measurement store's machines table are made of.
#pragma once

#include "looptool/measure/measure.h"
#include "util/machine.h"

namespace looptool {

/// Caches, vector width and usable cores from util/machine.h; the peak from
/// machine_peak_gflops() (the stored peak, else measured once and stored; MAX_GFLOPS ignored:
/// it overrides the reward's roof, not the hardware).
inline looptune::MachineFigures this_machine() {
    looptune::MachineFigures m = looptune::host_figures_without_peak();
    m.peak_gflops = machine_peak_gflops();
    return m;
}

}  // namespace looptool
