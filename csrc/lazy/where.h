// Where the user issued an op: set by the extension module to a function
// that returns "file.py:123" for the innermost Python frame outside torch
// and torch_tpu (null when the calling thread runs no Python), so that an
// error raised later, when a deferred batch compiles or runs, can name the
// line that issued the op. The strings are interned: a pointer stays valid
// for the life of the process, so recording one costs no allocation.
#pragma once

#include <string>

namespace tpu::lazy {

using WhereFn = const std::string* (*)();
void SetWhereHook(WhereFn fn);
// The calling thread's user line now ("file.py:123"), or null.
const std::string* CurrentWhere();

}  // namespace tpu::lazy
