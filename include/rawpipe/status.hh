// Control-path error reporting. Data-path code never returns Status: it counts (see
// pipeline/stats/drop_reason.hh). A Status message is written for the person running rawpipe:
// what failed, why, and what to do about it.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace rawpipe {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }
  template <typename... Args>
  static Status errorf(fmt::format_string<Args...> format, Args&&... args) {
    return Status(fmt::format(format, std::forward<Args>(args)...));
  }

  bool is_ok() const noexcept { return !message_.has_value(); }
  explicit operator bool() const noexcept { return is_ok(); }
  const std::string& message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }
  // Adds what the caller was doing in front of the callee's reason.
  Status context(std::string_view what) const {
    if (is_ok()) return *this;
    return Status(fmt::format("{}: {}", what, *message_));
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like std::expected
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }  // NOLINT

  bool is_ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }
  const std::string& message() const { return std::get<Status>(v_).message(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace rawpipe

// Returns early from a function returning Status or Result<T> when `expr` failed.
#define RAWPIPE_TRY(expr)                   \
  do {                                      \
    ::rawpipe::Status rawpipe_try_ = (expr); \
    if (!rawpipe_try_.is_ok()) return rawpipe_try_; \
  } while (0)
