#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Relacy model uses the memory orders of the code, function by function.

   usage: relacy-orders.py test/task-protocol-relacy.cpp lib/task-shared.c \
                           lib/task.h

For each function of the code (lib/task-shared.c, and task.h's inline
functions), the memory_order_* arguments in the order they appear (an
atomic_* call without _explicit counts as seq_cst); for each function of
the model, its rl::mo_* arguments (TWIN_WEAKENS(rl::mo_X) counts as X: the
broken twin's one change).  Every
function of the code with an order must be in the model with the same
sequence, or be listed in the model as "not modelled: NAME (ORDERS): why",
with its sequence (so a change there fails too, and asks whether the model
needs the function now); a model
function with orders must be one of the code's, or the model's own
(model_*: libuv and the user's code; litmus_*: the setup's check).  Any
difference fails, naming the function and both sequences.
"""

import re
import sys

# A definition starts at column 0 with its type and name, its signature
# ends with "{" (a declaration's with ";"), and its body at the first "}"
# at column 0 (the project's and the model's layout).
DEF = re.compile(r"^(?!typedef|struct|enum|template|#)[A-Za-z_][\w \*]*?"
                 r"\b(\w+)\(")


def functions(path, order_re):
    text = open(path, encoding="utf-8").read()
    # Comments out: prose may name an order.
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"),
                  text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    funcs = {}
    name = None  # the function whose signature or body this line is in
    body = False
    for line in text.split("\n"):
        end = line.rstrip()
        if not body:
            m = DEF.match(line)
            if m:
                name = m.group(1)  # (a new signature ends any before it)
            if name is None:
                continue
            if end.endswith(";"):
                name = None  # a declaration
                continue
            if not end.endswith("{"):
                if "{" in end and end.endswith("}"):
                    sys.exit(f"relacy-orders: {path}: {name} is on one "
                             f"line; the check reads bodies line by line")
                continue
            if name in funcs:
                sys.exit(f"relacy-orders: {path}: {name} is defined twice")
            funcs[name] = []
            body = True
        # An implicit order (the second group matched) is seq_cst.
        funcs[name] += [m.group(1) or "seq_cst"
                        for m in order_re.finditer(line)]
        if line.startswith("}"):
            name = None
            body = False
    return funcs, text


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    code = {}
    for path in sys.argv[2:]:
        funcs, _ = functions(path, re.compile(
            r"\bmemory_order_(\w+)|\b(?:atomic_(?:load|store|exchange|"
            r"fetch_[a-z]+|compare_exchange_(?:weak|strong))|"
            r"atomic_flag_test_and_set|atomic_flag_clear)\s*\(()"))
        for name in funcs:
            if name in code:
                sys.exit(f"relacy-orders: {name} is defined twice")
        code.update(funcs)
    model, _ = functions(sys.argv[1], re.compile(r"\brl::mo_(\w+)"))
    raw = open(sys.argv[1], encoding="utf-8").read()
    skipped = {m.group(1): m.group(2).split()
               for m in re.finditer(r"not modelled: (\w+) \(([\w ]*)\):", raw)}
    errors = []
    for name, orders in sorted(code.items()):
        if not orders:
            continue
        if name in skipped:
            if name in model and model[name]:
                errors.append(f"{name}: listed as not modelled, but the "
                              f"model has it")
            elif skipped[name] != orders:
                errors.append(f"{name}: not modelled, listed with "
                              f"{skipped[name]}, but the code has {orders} "
                              f"now (does the model need it?)")
            continue
        if name not in model:
            errors.append(f"{name}: {orders} in the code, not in the model "
                          f"(model it, or list it: \"not modelled: {name} "
                          f"({' '.join(orders)}): why\")")
        elif model[name] != orders:
            errors.append(f"{name}: the code has {orders}, the model "
                          f"{model[name]}")
        else:
            print(f"{name}: {' '.join(orders)}")
    for name in sorted(set(skipped) - set(code)):
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
