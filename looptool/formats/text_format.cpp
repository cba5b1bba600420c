#include "looptool/formats/text_format.h"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "looptool/formats/loop_tool_import.h"
#include "looptool/formats/temp_file.h"
#include "looptool/ir/error.h"

namespace looptool {

std::string dump(const Program &p, bool show_cursor) {
    const Computation &c = *p.comp;
    std::string out;
    int flat = 0;
    for (const auto &nest : p.tree.nests) {
        auto names = loop_names(c, nest);
        for (size_t d = 0; d < nest.loops.size(); ++d, ++flat) {
            const Loop &l = nest.loops[d];
            out += std::string(d, ' ') + fmt::format("for {} in {}", names[d], l.size);
            if (l.tail) out += fmt::format(" r {}", l.tail);
            out += fmt::format(" : L{}", flat);
            if (l.unroll) out += " [unroll]";
            if (l.vectorize) out += " [vectorize]";
            if (l.parallel) out += " [parallel]";
            if (int(d) < nest.shared) out += " [shared with the next nest]";
            if (show_cursor && flat == p.cursor) out += " <<<<<< cursor";
            out += "\n";
        }
        for (int s : nest.stmts)
            out += std::string(nest.loops.size(), ' ') + format_stmt(c, c.stmts[size_t(s)]) + "\n";
    }
    return out;
}

namespace {
const char *kind_name(TensorKind k) {
    switch (k) {
        case TensorKind::Input: return "input";
        case TensorKind::Output: return "output";
        case TensorKind::Temp: return "temp";
        case TensorKind::Scratch: return "scratch";
    }
    return "?";
}
}  // namespace

std::string serialize(const Program &p) {
    const Computation &c = *p.comp;
    std::string out = "looptool-program 1\n";
    out += fmt::format("name {}\n", c.name);
    for (const auto &v : c.vars) out += fmt::format("var {} {}\n", v.name, v.extent);
    for (const auto &t : c.tensors) {
        out += fmt::format("tensor {} {}", t.name, kind_name(t.kind));
        for (auto s : t.shape) out += fmt::format(" {}", s);
        out += "\n";
    }
    for (const auto &s : c.stmts) out += fmt::format("stmt {}\n", format_stmt(c, s));
    for (const auto &nest : p.tree.nests) {
        out += "nest";
        for (int s : nest.stmts) out += fmt::format(" {}", s);
        out += "\n";
        if (nest.shared) out += fmt::format("shared {}\n", nest.shared);
        for (const auto &l : nest.loops) {
            out += fmt::format("loop {} {} {}", c.vars[size_t(l.var)].name, l.size, l.tail);
            if (l.unroll) out += " unroll";
            if (l.vectorize) out += " vectorize";
            if (l.parallel) out += " parallel";
            out += "\n";
        }
    }
    out += fmt::format("cursor {}\n", p.cursor);
    return out;
}

std::string read_file(const std::string &path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(fmt::format("{}: is a directory, not a file", path));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open file", path));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw Error(fmt::format("{}: read error", path));
    return ss.str();
}

Program load_program_file(const std::string &path) {
    std::string text = read_file(path);
    if (text.rfind("looptool-program", 0) == 0) return parse_program(text, path);
    if (text.rfind("v:", 0) == 0 || text.rfind("n:", 0) == 0) return import_loop_tool(text, path);
    throw Error(
        fmt::format("{}: not a benchmark file (expected 'looptool-program' or loop_tool's "
                    "'v:' lines)",
                    path));
}

void write_file_atomically(const std::string &path, std::string_view content) {
    const std::string tmp = write_temp_file(path, content);
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::remove(tmp.c_str());
        throw Error(fmt::format("{}: cannot rename into place: {}", path, ec.message()));
    }
}

}  // namespace looptool
