//===- Kernel.cpp - step attributes and the kernel table ------------------===//

#include "Kernel.h"
#include "KernelRegistry.h"

#include <algorithm>
#include <fmt/format.h>

namespace moec::cpu {

const nlohmann::json &Attrs::lookup(std::string_view name) const {
  auto it = json.find(std::string(name));
  if (it == json.end())
    throw Error(fmt::format("{}: the plan step has no attribute '{}'", op, name));
  return *it;
}

bool Attrs::has(std::string_view name) const {
  return json.is_object() && json.contains(std::string(name));
}

int64_t Attrs::getInt(std::string_view name) const {
  const nlohmann::json &v = lookup(name);
  if (!v.is_number_integer())
    throw Error(fmt::format("{}: attribute '{}' must be an integer, got {}", op,
                            name, v.dump()));
  return v.get<int64_t>();
}

int64_t Attrs::getInt(std::string_view name, int64_t fallback) const {
  return has(name) ? getInt(name) : fallback;
}

double Attrs::getFloat(std::string_view name) const {
  const nlohmann::json &v = lookup(name);
  if (!v.is_number())
    throw Error(fmt::format("{}: attribute '{}' must be a number, got {}", op,
                            name, v.dump()));
  return v.get<double>();
}

double Attrs::getFloat(std::string_view name, double fallback) const {
  return has(name) ? getFloat(name) : fallback;
}

bool Attrs::getFlag(std::string_view name) const {
  if (!has(name))
    return false;
  const nlohmann::json &v = lookup(name);
  return v.is_boolean() ? v.get<bool>() : true;
}

std::string Attrs::getString(std::string_view name) const {
  const nlohmann::json &v = lookup(name);
  if (!v.is_string())
    throw Error(fmt::format("{}: attribute '{}' must be a string, got {}", op,
                            name, v.dump()));
  return v.get<std::string>();
}

void KernelContext::fail(const std::string &message) const {
  throw Error(fmt::format("{}: {}", op, message));
}

KernelFn lookupKernel(std::string_view opName) {
  for (const KernelEntry &entry : kernelTable())
    if (entry.name == opName)
      return entry.fn;
  return nullptr;
}

std::vector<std::string> kernelNames() {
  std::vector<std::string> names;
  for (const KernelEntry &entry : kernelTable())
    names.emplace_back(entry.name);
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace moec::cpu
