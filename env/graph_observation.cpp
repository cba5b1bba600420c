#include "env/graph_observation.h"

#include <fmt/format.h>

#include <boost/graph/graphml.hpp>
#include <boost/graph/graphviz.hpp>
#include <boost/property_map/dynamic_property_map.hpp>
#include <cmath>
#include <sstream>

#include "looptool/formats/text_format.h"

namespace looptune {

using namespace looptool;

Graph loop_tree_graph(const Program &p) {
    const Computation &c = *p.comp;
    Graph g;
    auto root = boost::add_vertex(GraphVertex{"root", c.name}, g);
    int flat = 0;
    for (const auto &nest : p.tree.nests) {
        auto names = loop_names(c, nest);
        auto parent = root;
        for (size_t d = 0; d < nest.loops.size(); ++d, ++flat) {
            const Loop &l = nest.loops[d];
            GraphVertex v{"loop",
                          fmt::format("L{} {} in {}{}", flat, names[d], l.size,
                                      l.tail ? fmt::format(" r {}", l.tail) : ""),
                          l.var,
                          l.size,
                          l.tail,
                          l.unroll,
                          l.vectorize,
                          flat == p.cursor,
                          int(d) + 1};
            auto u = boost::add_vertex(v, g);
            boost::add_edge(parent, u, g);
            parent = u;
        }
        for (int s : nest.stmts) {
            GraphVertex v{"stmt", format_stmt(c, c.stmts[size_t(s)])};
            v.depth = int(nest.loops.size()) + 1;
            auto u = boost::add_vertex(v, g);
            boost::add_edge(parent, u, g);
        }
    }
    return g;
}

Graph dataflow_graph(const Computation &c) {
    Graph g;
    std::vector<Graph::vertex_descriptor> tensor_vertex;
    for (const auto &t : c.tensors) {
        std::string shape;
        for (auto s : t.shape) shape += (shape.empty() ? "" : "x") + std::to_string(s);
        tensor_vertex.push_back(boost::add_vertex(GraphVertex{"tensor", t.name + " " + shape}, g));
    }
    for (const auto &st : c.stmts) {
        auto s = boost::add_vertex(GraphVertex{"stmt", format_stmt(c, st)}, g);
        std::vector<const Expr *> stack{&st.value};
        std::vector<int> reads;
        while (!stack.empty()) {
            const Expr *e = stack.back();
            stack.pop_back();
            if (e->op == OpKind::Read &&
                std::find(reads.begin(), reads.end(), e->access.tensor) == reads.end())
                reads.push_back(e->access.tensor);
            for (const auto &a : e->args) stack.push_back(&a);
        }
        for (int t : reads) boost::add_edge(tensor_vertex[size_t(t)], s, g);
        boost::add_edge(s, tensor_vertex[size_t(st.out.tensor)], g);
    }
    return g;
}

namespace {
boost::dynamic_properties properties(Graph &g) {
    boost::dynamic_properties dp(boost::ignore_other_properties);
    dp.property("node_id", boost::get(boost::vertex_index, g));
    dp.property("kind", boost::get(&GraphVertex::kind, g));
    dp.property("label", boost::get(&GraphVertex::label, g));
    dp.property("size", boost::get(&GraphVertex::size, g));
    dp.property("tail", boost::get(&GraphVertex::tail, g));
    dp.property("unroll", boost::get(&GraphVertex::unroll, g));
    dp.property("vectorize", boost::get(&GraphVertex::vectorize, g));
    dp.property("cursor", boost::get(&GraphVertex::cursor, g));
    dp.property("depth", boost::get(&GraphVertex::depth, g));
    return dp;
}
}  // namespace

std::string to_dot(const Graph &graph) {
    Graph g = graph;  // dynamic_properties needs mutable property maps
    std::ostringstream out;
    boost::write_graphviz_dp(out, g, properties(g));
    return out.str();
}

std::string to_graphml(const Graph &graph) {
    Graph g = graph;
    std::ostringstream out;
    boost::write_graphml(out, g, properties(g), true);
    return out.str();
}

DenseGraph to_dense(const Graph &g, const std::vector<float> &graph_features) {
    DenseGraph d;
    d.graph_features = graph_features;
    d.num_vertices = int(boost::num_vertices(g));
    d.features.assign(size_t(d.num_vertices) * kGraphVertexFeatures, 0.0f);
    for (auto v : boost::make_iterator_range(boost::vertices(g))) {
        const GraphVertex &gv = g[v];
        float *f = &d.features[v * kGraphVertexFeatures];
        f[0] = gv.kind == "root";
        f[1] = gv.kind == "loop";
        f[2] = gv.kind == "stmt";
        f[3] = gv.kind == "tensor";
        f[4] = float(std::log2(double(gv.size) + 1));
        f[5] = float(std::log2(double(gv.tail) + 1));
        f[6] = gv.unroll;
        f[7] = gv.vectorize;
        f[8] = gv.cursor;
        f[9] = float(gv.depth) / 16.0f;
    }
    for (auto e : boost::make_iterator_range(boost::edges(g)))
        d.edges.emplace_back(int(boost::source(e, g)), int(boost::target(e, g)));
    return d;
}

}  // namespace looptune
