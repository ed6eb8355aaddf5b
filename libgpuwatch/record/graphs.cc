#include "libgpuwatch/record/graphs.h"

#include <algorithm>

namespace gpuwatch {

void GraphTable::OnNodeCreated(uint64_t node_id, uintptr_t graph, const GraphWork& work) {
  std::lock_guard<Mutex> lock(mu_);
  GraphWork& kept = nodes_[node_id] = work;
  kept.made = ++made_;
  if (graph != 0) graphs_[graph].push_back(node_id);
}

void GraphTable::SetAddress(uint64_t node_id, uint64_t address) {
  std::lock_guard<Mutex> lock(mu_);
  const auto it = nodes_.find(node_id);
  if (it != nodes_.end()) it->second.address = address;
}

void GraphTable::OnNodeCloned(uint64_t clone, uint64_t original, uintptr_t graph) {
  std::lock_guard<Mutex> lock(mu_);
  const auto it = nodes_.find(original);
  if (it == nodes_.end()) return;  // a node of a type gpuwatch does not follow
  const GraphWork work = it->second;
  nodes_[clone] = work;
  if (graph != 0) graphs_[graph].push_back(clone);
}

void GraphTable::AddInstantiatedClone(uintptr_t thread, uint64_t clone) {
  std::lock_guard<Mutex> lock(mu_);
  if (nodes_.count(clone) != 0) instantiating_[thread].push_back(clone);
}

void GraphTable::OnExecCreated(uintptr_t exec, uintptr_t graph, uintptr_t thread) {
  std::lock_guard<Mutex> lock(mu_);
  std::vector<uint64_t> kept;
  if (auto it = instantiating_.find(thread); it != instantiating_.end()) {
    kept = std::move(it->second);
    instantiating_.erase(it);
  } else if (auto g = graphs_.find(graph); g != graphs_.end()) {
    kept = g->second;
  }
  const auto made = [this](uint64_t id) {
    const auto it = nodes_.find(id);
    return it != nodes_.end() ? it->second.made : 0;
  };
  std::stable_sort(kept.begin(), kept.end(),
                   [&made](uint64_t a, uint64_t b) { return made(a) < made(b); });
  execs_[exec] = std::move(kept);
}

void GraphTable::EndInstantiation(uintptr_t thread) {
  std::lock_guard<Mutex> lock(mu_);
  instantiating_.erase(thread);
}

void GraphTable::ForgetLocked(NodeLists& owners, uintptr_t owner, const NodeLists& others) {
  const auto it = owners.find(owner);
  if (it == owners.end()) return;
  for (const uint64_t id : it->second) {
    const bool held = std::any_of(others.begin(), others.end(), [id](const auto& other) {
      return std::find(other.second.begin(), other.second.end(), id) != other.second.end();
    });
    if (!held) nodes_.erase(id);
  }
  owners.erase(it);
}

void GraphTable::OnGraphDestroyed(uintptr_t graph) {
  std::lock_guard<Mutex> lock(mu_);
  ForgetLocked(graphs_, graph, execs_);  // nodes an exec still uses stay
}

void GraphTable::OnExecDestroyed(uintptr_t exec) {
  std::lock_guard<Mutex> lock(mu_);
  ForgetLocked(execs_, exec, graphs_);  // nodes of a graph that still exists stay
}

std::vector<std::pair<uint64_t, GraphWork>> GraphTable::WorkOf(uintptr_t exec) const {
  std::lock_guard<Mutex> lock(mu_);
  std::vector<std::pair<uint64_t, GraphWork>> out;
  const auto it = execs_.find(exec);
  if (it == execs_.end()) return out;
  out.reserve(it->second.size());
  for (const uint64_t id : it->second) {
    const auto node = nodes_.find(id);
    if (node != nodes_.end()) out.emplace_back(id, node->second);
  }
  return out;
}

bool GraphTable::Find(uint64_t node_id, GraphWork* out) const {
  std::lock_guard<Mutex> lock(mu_);
  const auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  *out = it->second;
  return true;
}

size_t GraphTable::node_count() const {
  std::lock_guard<Mutex> lock(mu_);
  return nodes_.size();
}

}  // namespace gpuwatch
