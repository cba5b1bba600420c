// Graph observations built with Boost.Graph:
//  - the loop tree: a root, one vertex per loop and per statement, edges parent -> child;
//  - the dataflow graph: one vertex per tensor and per statement, edges tensor -> statement
//    (read) and statement -> tensor (write).
// Each exports to Graphviz DOT and GraphML, and to a dense feature matrix + edge list for a
// message-passing network.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptune {

struct GraphVertex {
    std::string kind;   // "root", "loop", "stmt", "tensor"
    std::string label;  // human-readable
    // Loop features (zero for other kinds).
    int var = -1;
    int64_t size = 0, tail = 0;
    bool unroll = false, vectorize = false, cursor = false;
    int depth = 0;
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, GraphVertex>;

Graph loop_tree_graph(const looptool::Program &p);
Graph dataflow_graph(const looptool::Computation &c);

std::string to_dot(const Graph &g);
std::string to_graphml(const Graph &g);

/// Per-vertex features for a GNN: one-hot kind (root, loop, stmt, tensor), log2(size+1),
/// log2(tail+1), unroll, vectorize, cursor, depth/16.
inline constexpr int kGraphVertexFeatures = 10;
struct DenseGraph {
    int num_vertices = 0;
    std::vector<float> features;             // num_vertices x kGraphVertexFeatures
    std::vector<std::pair<int, int>> edges;  // (source, target)
    /// Graph-level features: the machine vector (env/observations.h, kMachineFeatures).
    std::vector<float> graph_features;
};
/// `graph_features`: the graph-level features, the environment's machine vector.
DenseGraph to_dense(const Graph &g, const std::vector<float> &graph_features);

}  // namespace looptune
