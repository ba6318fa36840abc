// Error types shared by every KernelRL component.
// UserError is bad user input (a config key, a path, a malformed file): the CLI prints its
// one-line message and exits non-zero, never a stack trace. Anything else is a bug or an
// environment failure and is reported as an internal error.
#pragma once

#include <stdexcept>
#include <string>

namespace kernelrl {

// Bad input from the user; what() is one line saying what was wrong and what to do.
class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A configuration problem; what() starts with the full YAML key path.
class ConfigError : public UserError {
 public:
  using UserError::UserError;
};

// A capability that this build or this machine lacks (for example CUDA kernels without a GPU).
class NotAvailableError : public UserError {
 public:
  using UserError::UserError;
};

// Another process of a multi-process job died or failed (or this one lost it): what() is one
// line naming the rank. The CLI prints it like a UserError and exits 3.
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kernelrl
