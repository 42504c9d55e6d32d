// Errors as values: expected failures (bad trace, bad flag, infeasible LP) are
// returned as Status / Result<T> inside the library and become one line at the
// CLI edge: "stallprof: error: <what>, <why>, <what to do>".
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace stallprof {

// Exit codes the CLI maps errors to.
enum class ErrorKind {
  kUsage = 2,        // bad flag or argument
  kInput = 3,        // unreadable, corrupt, truncated or incompatible input
  kRuntime = 4,      // failure while running (spawn, shared memory, solver)
  kUnsupported = 5,  // a measurement the input lacks
};

struct Error {
  ErrorKind kind = ErrorKind::kRuntime;
  std::string message;  // one line, no "error:" prefix, no trailing period
};

class Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)) {}  // NOLINT: implicit by design
  static Status Ok() { return {}; }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  Status status() const { return ok() ? Status::Ok() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

inline Error UsageError(std::string m) { return {ErrorKind::kUsage, std::move(m)}; }
inline Error InputError(std::string m) { return {ErrorKind::kInput, std::move(m)}; }
inline Error RuntimeError(std::string m) { return {ErrorKind::kRuntime, std::move(m)}; }
inline Error UnsupportedError(std::string m) { return {ErrorKind::kUnsupported, std::move(m)}; }

}  // namespace stallprof
