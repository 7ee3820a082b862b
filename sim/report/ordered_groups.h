// Indices gathered under a key, the keys in order of first appearance: the sweep outputs list their
// groups, workloads and series in grid order, so that equal tables give equal files.
#pragma once

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

namespace moesim {

template <typename Key>
class OrderedGroups {
 public:
  // Appends i to the key's indices (a new key goes last); returns the key's position.
  std::size_t add(const Key& key, int i) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      it = index_.emplace(key, entries_.size()).first;
      entries_.emplace_back(key, std::vector<int>{});
    }
    entries_[it->second].second.push_back(i);
    return it->second;
  }

  const std::vector<std::pair<Key, std::vector<int>>>& entries() const { return entries_; }

 private:
  std::map<Key, std::size_t> index_;
  std::vector<std::pair<Key, std::vector<int>>> entries_;
};

}  // namespace moesim
