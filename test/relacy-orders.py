#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Relacy model uses the memory orders of the code, function by function.

   usage: relacy-orders.py lib/task-shared.c test/task-protocol-relacy.cpp

For each function of lib/task-shared.c, the memory_order_* arguments in the
order they appear (an atomic_* call without _explicit counts as seq_cst); for each function of the model, its rl::mo_* arguments
(TWIN_WEAKENS(rl::mo_X) counts as X: the broken twin's one change).  Every
function of the code with an order must be in the model with the same
sequence, or be listed in the model as "not modelled: NAME: why"; a model
function with orders must be one of the code's, or the model's own
(model_*: libuv and the user's code; litmus_*: the setup's check).  Any
difference fails, naming the function and both sequences.
"""

import re
import sys

# A definition starts at column 0 with its type and name, and ends at the
# first "}" at column 0 (the project's and the model's layout).
DEF = re.compile(r"^(?!typedef|struct|enum|template|#)[A-Za-z_][\w \*]*?"
                 r"\b(\w+)\(")


def functions(path, order_re):
    text = open(path, encoding="utf-8").read()
    # Comments out: prose may name an order.
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"),
                  text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    funcs = {}
    name = None
    for line in text.split("\n"):
        if name is None:
            m = DEF.match(line)
            if m and not line.rstrip().endswith(";"):
                name = m.group(1)
                funcs[name] = []
        if name is not None:
            # An implicit order (the second group matched) is seq_cst.
            funcs[name] += [m.group(1) or "seq_cst"
                            for m in order_re.finditer(line)]
            if line.startswith("}"):
                name = None
    return funcs, text


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    code, _ = functions(sys.argv[1], re.compile(
        r"\bmemory_order_(\w+)|\b(?:atomic_(?:load|store|exchange|fetch_[a-z]+|"
        r"compare_exchange_(?:weak|strong))|atomic_flag_test_and_set|"
        r"atomic_flag_clear)\s*\(()"))
    model, _ = functions(sys.argv[2], re.compile(r"\brl::mo_(\w+)"))
    raw = open(sys.argv[2], encoding="utf-8").read()
    skipped = set(re.findall(r"not modelled: (\w+):", raw))
    errors = []
    for name, orders in sorted(code.items()):
        if not orders:
            continue
        if name in skipped:
            if name in model and model[name]:
                errors.append(f"{name}: listed as not modelled, but the "
                              f"model has it")
            continue
        if name not in model:
            errors.append(f"{name}: {orders} in the code, not in the model "
                          f"(model it, or list it: \"not modelled: {name}: "
                          f"why\")")
        elif model[name] != orders:
            errors.append(f"{name}: the code has {orders}, the model "
                          f"{model[name]}")
        else:
            print(f"{name}: {' '.join(orders)}")
    for name in sorted(skipped - set(code)):
        errors.append(f"{name}: listed as not modelled, but no function of "
                      f"the code has that name")
    for name, orders in sorted(model.items()):
        if name in code or not orders:
            continue
        if not name.startswith(("model_", "litmus_")):
            errors.append(f"{name}: the model's function has orders "
                          f"{orders} but the code has no such function")
    for e in errors:
        print("relacy-orders: " + e, file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"relacy-orders: {sum(1 for o in code.values() if o)} functions "
          f"with orders, {len(skipped)} not modelled, the rest match")


main()
