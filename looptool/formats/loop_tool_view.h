// loop_tool's `view` node constraints, read as affine index equations: LoopTune's conv files
// express X[n, c, ho + kh, wo + kw] as a view of X[n, c, h, w] with constraints such as
// `h = ho + kh` and `size(h) = 56` (../shared/corpus/looptune/README.md). This turns them into
// what our IR says directly: one Affine per indexed dimension (ir.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "looptool/ir/ir.h"

namespace looptool {

/// s cut at every `sep` (empty fields kept: "a,,b" gives a, "", b): the field splitter of
/// loop_tool's text format, for its importer and the view-constraint reader alike.
std::vector<std::string> split_fields(const std::string &s, char sep);

/// The constraints of one view node, over loop_tool's variable ids.
struct ViewConstraints {
    /// var = affine(other vars); Affine::Term::var holds loop_tool variable ids.
    std::map<int, std::vector<Affine>> definitions;
    /// size(var) = value
    std::map<int, int64_t> sizes;

    /// The first definition of `var` that uses only variables in `allowed`, if any.
    std::optional<Affine> definition_over(int var, const std::vector<int> &allowed) const;
};

/// Parses the constraints field (`op|kind|payload|;...=...;/...`) and the symbol map
/// (`symbol_node=var,...`) of a view node. Items are numbered in order across the whole
/// field; kinds: `s` a symbol, `v` an integer value, `r` a reference to an earlier item,
/// `f` a function of earlier items with op 1 (negate), 3 (size) or 5 (add). Each constraint
/// is `lhs = rhs`, the last item of each side being its root. Throws Error (with `what`
/// naming the place) for anything else, including a product of variables.
ViewConstraints parse_view_constraints(const std::string &constraints, const std::string &symbols,
                                       const std::string &what);

}  // namespace looptool
