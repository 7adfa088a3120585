"""ε-removal for weighted PDAs: a `WeightedPDA` with ε-arcs → a real-time one (one input symbol and
one stack operation per step, the normal form of Lang's algorithm and the NS-RNN compiler) with
the same weight on every nonempty string, in any closed semiring of `pdanet.automata.semiring`.

Semantics (see `pdanet.automata.weighted`): a run may take ε-arcs anywhere; a string's weight is
the ⊕ over the accepting runs that read it of the ⊗ of their arc weights, an infinite sum when
ε-arcs form cycles, defined as the closure (Lehmann 1977; `DivergenceError` where it diverges).

Construction (after Butoi, Cotterell et al. 2022, "Algorithms for weighted pushdown automata",
nullary/unary removal via pop and height-preserving summaries; Mohri 2002, ε-closure in a closed
semiring). Over the ε-arcs alone, for states q, r and tops c, c' (⊥ included):

- ``H[q, c → r, c']``: the weight of the ε-computations from q with c on top that end in r with
  that cell replaced by c' at the same height, never popping it (the empty computation included);
- ``P[q, c → r]``: the weight of the ε-computations from q with c on top that end by popping that
  cell ("pop computations"), arriving in r.

They are the least solution of ``H = M*`` with ``M[(q,c),(r,c')] = ε-replace(q,c→r,c') ⊕
[c = c'] ⊕_{s,d} ε-push(q,c→s,d) ⊗ P[s,d→r]`` and ``P[q,c→r] = ⊕_{s,c'} H[q,c→s,c'] ⊗
ε-pop(s,c'→r)``: each round computes the star by `closure` and P from it, from P = 0 until P
repeats exactly (Kleene iteration of a monotone map, whose first repeat is the least fixpoint).
Every ε-computation decomposes uniquely into pop computations down to its lowest cell, a
height-preserving part there, and "ups" (an ε-push never popped afterwards, then H on that cell).

The result keeps the top of the stack in its state ("top-in-state"): state ``(q, x)`` means
state q of `m` with x (a stack symbol or `BOTTOM`) on top; its own stack holds the cells below x.
One step of it is an input arc of `m` together with all the ε-arcs after it (and, on the first
step, from the extra start state `INIT`, also the ε-arcs before it). That step must have a net
effect that the top-in-state machine does with one operation: it may only touch the cell the
input arc reads and the one below it, and end at most one cell higher (then with the cell below unchanged) or lower.
Its weight is the ⊕ over the decompositions above, so every run of `m` on a nonempty string is
counted exactly once.

Which machines are handled. Every machine whose ε-steps, wherever they can follow an input arc
(in the reachable part of the top-in-state machine):
1. never pop the cell below the top the input arc started on (they may pop the top and replace
   that cell): a chain of ε-pops exposing deeper cells is not one real-time operation;
2. end at most one cell above that top, without changing the cell below (ε-pushes that stay
   on the stack: at most one per step; before the first symbol, at most two);
3. have ε-pushes that are popped again within the ε-steps nested to a bounded depth, so that the
   fixpoint of P is reached exactly, within |Q|·|Γ⊥|·|Q| + 2 rounds (in the boolean semiring,
   and in the Viterbi and tropical ones when deeper nesting never improves a weight, it is
   reached whatever the nesting).
Violations raise AutomatonError naming the input arc and the reason; a cycle of ε-arcs whose
weights sum to ≥ 1 (a negative cycle in the tropical semiring), reachable or not, raises
DivergenceError naming its ε-arcs. Exactness: the rational semiring gives exact Fractions; real,
log and tropical are float64 (P is a float fixpoint).

`string_weight(m, s)` is the independent reference: it simulates the configurations (state,
whole stack) on `s`, taking the ε-closure of the reachable configurations after every symbol by
`closure`; exact where the ε-moves build stacks of bounded height (SearchBoundError otherwise).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from pdanet.automata import semiring as srm
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.weighted import WeightedPDA
from pdanet.automata.weighted_ops import closure
from pdanet.errors import AutomatonError, DivergenceError, InputError, SearchBoundError

INIT = ("init",)


class _Eps:
    """The ε-arcs of a machine by kind, and their summaries H and P, in one semiring."""

    def __init__(self, m: WeightedPDA, sr: srm.Semiring):
        self.m, self.sr = m, sr
        Q, G = m.num_states, m.num_stack
        self.Q, self.G = Q, G
        si = m._state_index
        self.replace: list = []            # (q, c, r, c', w) indices
        self.push: list = []               # (q, c, r, d, w)
        self.pop: list = []                # (q, c, r, w)
        self.arc_of: dict = {}             # (kind, q, c, r, y) -> key, for messages
        for key, w in m.epsilon_arcs.items():
            q, x, _, r, op, y = key
            v = _convert(w, m.semiring, sr)
            if sr.is_zero(v):
                continue
            qi, ci, ri = si[q], m.stack_index(x), si[r]
            if op == "pop":
                self.pop.append((qi, ci, ri, v))
            elif op == "replace":
                self.replace.append((qi, ci, ri, m.stack_index(y), v))
            else:
                self.push.append((qi, ci, ri, m.stack_index(y), v))
        self.labels = [f"(state {m.states[q]!r}, top {m.stack_symbol(c)!r})"
                       for q in range(Q) for c in range(G)]
        self.H, self.P = self._summaries()

    def _matrix(self, P: np.ndarray) -> np.ndarray:
        sr, G = self.sr, self.G
        M = sr.array((self.Q * G, self.Q * G))
        for q, c, r, c2, w in self.replace:
            M[q * G + c, r * G + c2] = sr.plus(M[q * G + c, r * G + c2], w)
        for q, c, s, d, w in self.push:
            for r in range(self.Q):
                if not sr.is_zero(P[s, d, r]):
                    M[q * G + c, r * G + c] = sr.plus(M[q * G + c, r * G + c],
                                                      sr.times(w, P[s, d, r]))
        return M

    def _summaries(self) -> tuple[np.ndarray, np.ndarray]:
        sr, Q, G = self.sr, self.Q, self.G
        P = sr.array((Q, G, Q))
        self._H = None
        rounds = Q * G * Q + 2
        for _ in range(rounds):
            M = self._matrix(P)
            try:
                star = closure(M, sr, self.labels)
            except DivergenceError as exc:
                raise DivergenceError(f"remove_epsilon: the ε-arcs {self._cycle_arcs(M, P)} lie on "
                                      f"cycles whose weights do not sum to a finite value — {exc}"
                                      ) from None
            H = self._H = star.reshape(Q, G, Q, G)
            new = sr.array((Q, G, Q))
            for s, c2, r, w in self.pop:
                new[:, :, r] = sr.plus(new[:, :, r], sr.times(H[:, :, s, c2], w))
            if bool(np.all(np.asarray(new == P, dtype=bool))):
                return H, P
            P = new
        deep = sorted({self.m.stack_symbol(d) for _, _, _, d, _ in self.push}, key=repr)
        raise AutomatonError(
            f"remove_epsilon: the weights of the ε-pop computations do not reach their fixpoint in "
            f"{rounds} rounds: ε-pushes of {deep} nest without bound inside ε-computations (their "
            f"weight is an algebraic series, not a closure); this is not handled — bound the "
            "nesting of ε-pushes (e.g. do not let an ε-computation on a symbol push that symbol "
            "again)")

    def _cycle_arcs(self, M: np.ndarray, P: np.ndarray) -> list:
        """The ε-arcs on a cycle of M's support: replace arcs, push arcs (through the pop
        computations that return from them) and the pop arcs ending those computations."""
        supp = ~np.asarray(self.sr.is_zero(M), dtype=bool)
        C = closure(supp, "boolean")                   # reflexive–transitive reachability
        G, si, m = self.G, self.m._state_index, self.m
        out: list = []
        pushed: list = []
        for key in m.epsilon_arcs:
            q, x, _, r, op, y = key
            i = si[q] * G + m.stack_index(x)
            if op == "replace":
                on = C[si[r] * G + m.stack_index(y), i]
            elif op == "push":
                d = m.stack_index(y)
                on = any(C[t * G + m.stack_index(x), i] for t in range(self.Q)
                         if not self.sr.is_zero(P[si[r], d, t]))
                if on and self._H is not None:      # the pops that end its pop computations
                    pushed.append((si[r], d))
            else:
                on = False
            if on:
                out.append(key)
        for key in m.epsilon_arcs:
            q, x, _, r, op, _ = key
            if op == "pop" and any(not self.sr.is_zero(self._H[s, d, si[q], m.stack_index(x)])
                                   for s, d in pushed):
                out.append(key)
        return out


def _convert(w: Any, src: srm.Semiring, dst: srm.Semiring) -> Any:
    if src is dst:
        return w
    return srm.convert(np.array([w], dtype=src.dtype), src, dst)[0]


class _Builder:
    """The top-in-state machine: steps from (N-state, N-top) by local simulation."""

    def __init__(self, m: WeightedPDA, sr: srm.Semiring):
        self.m, self.sr = m, sr
        self.eps = _Eps(m, sr)
        self.arcs: dict = {}               # (q, c, a) -> [(r, op, yi, w, key)] input arcs
        si = m._state_index
        for key, w in m.transitions.items():
            q, x, a, r, op, y = key
            if a is EPSILON:
                continue
            v = _convert(w, m.semiring, sr)
            if sr.is_zero(v):
                continue
            yi = None if op == "pop" else m.stack_index(y)
            self.arcs.setdefault((si[q], m.stack_index(x)), []).append((a, si[r], op, yi, v, key))
        # useful states: an input arc or acceptance is reachable from them by ε-arcs (stack
        # ignored); configurations in other states weigh nothing in any accepting run
        useful = {si[q] for q in m.states if m.accepting is None or q in m.accepting}
        useful |= {q for q, _ in self.arcs}
        grew = True
        while grew:
            grew = False
            for q, x, _, r, _, _ in m.epsilon_arcs:
                if si[r] in useful and si[q] not in useful:
                    useful.add(si[q])
                    grew = True
        self.useful = useful

    def can_end(self, r: int, c: int) -> bool:
        """A step may end in state r with top c: an input arc follows, or acceptance."""
        m = self.m
        if (r, c) in self.arcs:
            return True
        return (m.accepting is None or m.states[r] in m.accepting) and \
            (not m.empty_stack or c == 0)

    # --- ε-segments -------------------------------------------------------------------------
    def segment(self, q: int, L: tuple, cap: int, why: Any) -> dict:
        """{(r, L'): weight} of the ε-computations from state q with local stack L (bottom
        first; L[0] is ⊥ or a cell whose popping would expose unknown cells), ending with at most
        `cap` cells."""
        sr, eps, Q = self.sr, self.eps, self.eps.Q
        lows: dict = {(q, L): sr.one}
        cur = dict(lows)
        while cur:
            nxt: dict = {}
            for (s, L1), w in cur.items():
                for t in range(Q):
                    p = eps.P[s, L1[-1], t]
                    if sr.is_zero(p) or t not in self.useful:
                        continue
                    if len(L1) == 1:
                        raise AutomatonError(
                            f"remove_epsilon: after {why}, ε-arcs can pop "
                            f"{self.m.stack_symbol(L1[0])!r} in state {self.m.states[s]!r}, "
                            "exposing the cell below the top the input arc started on; one "
                            "real-time step cannot do that (a chain of ε-pops): not handled")
                    _add(sr, nxt, (t, L1[:-1]), sr.times(w, p))
            for k, v in nxt.items():
                _add(sr, lows, k, v)
            cur = nxt
        out: dict = {}
        for (s, L1), w in lows.items():
            for r in range(Q):
                for c2 in range(eps.G):
                    h = eps.H[s, L1[-1], r, c2]
                    if not sr.is_zero(h):
                        self._ups(r, L1[:-1] + (c2,), sr.times(w, h), cap, why, out)
        return out

    def _ups(self, r: int, L: tuple, w: Any, cap: int, why: Any, out: dict) -> None:
        sr, eps = self.sr, self.eps
        if self.can_end(r, L[-1]):
            _add(sr, out, (r, L), w)
        for q, c, t, d, pw in eps.push:
            if q != r or c != L[-1]:
                continue
            for r2 in range(eps.Q):
                for d2 in range(eps.G):
                    h = eps.H[t, d, r2, d2]
                    if sr.is_zero(h) or r2 not in self.useful:
                        continue
                    if len(L) + 1 > cap and (self.can_end(r2, d2) or any(
                            q2 == r2 and c2 == d2 for q2, c2, *_ in eps.push)):
                        raise AutomatonError(
                            f"remove_epsilon: after {why}, ε-arcs can push "
                            f"{self.m.stack_symbol(d)!r} (state {self.m.states[r]!r}) on a stack "
                            f"already {len(L) - 1} cell(s) above the cell below the step's top; "
                            "one real-time step pushes at most one cell: not handled")
                    self._ups(r2, L + (d2,), sr.times(sr.times(w, pw), h), cap, why, out)

    # --- steps ------------------------------------------------------------------------------
    def steps(self, state: Any, nt: int) -> dict:
        """{(symbol, new N-state, op, y index, N-top): weight}: the steps of the top-in-state
        machine from N-state `state` with `nt` on top of its own stack."""
        sr = self.sr
        if state == INIT:
            starts = self.segment(self.m._state_index[self.m.start], (0,), 3,
                                  "the ε-arcs before the first symbol")
            base: tuple = ()
        else:
            q, x = state
            starts = {(q, (0,) if x == 0 else (nt, x)): sr.one}
            base = () if x == 0 or nt == 0 else (nt,)
        out: dict = {}
        for (q, L0), w0 in starts.items():
            for a, s, op, yi, v, key in self.arcs.get((q, L0[-1]), ()):
                if op == "replace":
                    L1 = L0[:-1] + (yi,)
                elif op == "push":
                    L1 = L0 + (yi,)
                else:
                    L1 = L0[:-1]
                cap = 3 if state == INIT else len(L0) + 1
                why = f"the input arc {key!r}"
                for (r, L2), w in self.segment(s, L1, cap, why).items():
                    new = tuple(c for c in L2[:-1] if c != 0)
                    if new == base:
                        nop = ("replace", base[-1] if base else 0)
                    elif base and len(new) == len(base) and new[:-1] == base[:-1]:
                        nop = ("replace", new[-1])
                    elif new[:-1] == base and len(new) == len(base) + 1:
                        nop = ("push", new[-1])
                    elif new == base[:-1]:
                        nop = ("pop", None)
                    else:
                        raise AutomatonError(
                            f"remove_epsilon: {why} with the ε-arcs around it turns the top "
                            f"cells {[self.m.stack_symbol(c) for c in L0]} into "
                            f"{[self.m.stack_symbol(c) for c in L2]}, which no single real-time "
                            "stack operation does (even with the top held in the state): not "
                            "handled")
                    target = (self.m.states[r], self.m.stack_symbol(L2[-1]))
                    k = (a, target, nop[0], nop[1], nt)
                    _add(sr, out, k, sr.times(sr.times(w0, v), w))
        return out


def _add(sr: srm.Semiring, d: dict, k: Hashable, v: Any) -> None:
    d[k] = sr.plus(d[k], v) if k in d else v


def remove_epsilon(m: WeightedPDA, semiring: srm.Semiring | str | None = None,
                   name: str | None = None) -> WeightedPDA:
    """A real-time `WeightedPDA` with the same weight as `m` on every nonempty string.

    The construction, and exactly which machines it handles, are in the module docstring: the
    result's states are `INIT` (the start) and pairs ``(q, x)`` (state q of `m` with x on top of
    the stack, `BOTTOM` included); its stack alphabet is `m`'s. It is computed in `semiring`
    (`m`'s by default; weights are converted): "rational" is exact, "real"/"log"/"tropical" are
    float64, "boolean" gives the support. Acceptance: the states ``(q, x)`` with q accepting in
    `m` (every q when ``m.accepting`` is None), x = `BOTTOM` when `m` accepts by empty stack.

    The empty string: a real-time machine reads one symbol per step and has no final weights, so
    the result gives it weight zero; its weight in `m` is ``string_weight(m, ())``. A machine that
    is already real-time is returned unchanged (in `semiring` if one is given).

    Raises AutomatonError (naming the input arc and the reason) for machines outside the handled
    class, DivergenceError naming the ε-arcs of a cycle whose weights sum to ≥ 1 (negative cost in
    the tropical semiring), InputError for an argument that is not a WeightedPDA.
    """
    if not isinstance(m, WeightedPDA):
        raise InputError(f"remove_epsilon needs a WeightedPDA, got {type(m).__name__}")
    sr = m.semiring if semiring is None else srm.get(semiring)
    if m.is_realtime:
        if sr is m.semiring:
            return m
        trans = {k: _convert(w, m.semiring, sr) for k, w in m.transitions.items()}
        return WeightedPDA(m.states, m.alphabet, m.stack_alphabet, trans, m.start, sr,
                           m.accepting, m.empty_stack, name or m.name)
    b = _Builder(m, sr)
    cache: dict = {}

    def steps(state: Any, nt: int) -> dict:
        if (state, nt) not in cache:
            cache[(state, nt)] = b.steps(state, nt)
        return cache[(state, nt)]

    def idx(state: Any) -> Any:
        return state if state == INIT else (m._state_index[state[0]], m.stack_index(state[1]))

    reach = {(INIT, 0)}
    below: dict = {}                       # pushed symbol -> N-tops it was pushed onto
    changed = True
    while changed:
        changed = False
        snapshot = set(reach)
        for state, nt in snapshot:
            for _, target, op, y, _ in steps(state, nt):
                tgt = idx(target)
                if op == "replace":
                    if nt != 0 and not below.get(nt, set()) <= below.setdefault(y, set()):
                        below[y] |= below[nt]        # the cells below stay when the top changes
                        changed = True
                    succ = {(tgt, y)}
                elif op == "push":
                    if nt not in below.setdefault(y, set()):
                        below[y].add(nt)
                        changed = True
                    succ = {(tgt, y)}
                else:
                    succ = {(tgt, u) for u in below.get(nt, ())}
                for p in succ - reach:
                    reach.add(p)
                    changed = True
    trans: dict = {}
    for state, nt in reach:
        src = state if state == INIT else (m.states[state[0]], m.stack_symbol(state[1]))
        for (a, target, op, y, _), w in steps(state, nt).items():
            key = (src, m.stack_symbol(nt), a, target, op,
                   None if op == "pop" else m.stack_symbol(y))
            _add(sr, trans, key, w)
    used = {st for st, _ in reach if st != INIT}
    used |= {idx(k[3]) for k in trans}
    pairs = [(q, m.stack_symbol(c)) for qi, q in enumerate(m.states) for c in range(m.num_stack)
             if (qi, c) in used]
    acc = [(q, x) for q, x in pairs
           if (m.accepting is None or q in m.accepting) and (not m.empty_stack or x is BOTTOM)]
    return WeightedPDA([INIT, *pairs], m.alphabet, m.stack_alphabet, trans, INIT, sr,
                       accepting=acc, empty_stack=False,
                       name=name or (f"remove_epsilon({m.name})" if m.name else None))


def _sccs(nodes: list, succ: dict) -> list:
    """Strongly connected components of a graph in topological order (networkx's condensation)."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from((v, w) for v in nodes for w in succ.get(v, ()))
    dag = nx.condensation(g)
    return [list(dag.nodes[c]["members"]) for c in nx.topological_sort(dag)]


def string_weight(m: WeightedPDA, string: Any, semiring: srm.Semiring | str | None = None,
                  max_height: int | None = None, max_configs: int = 20_000) -> Any:
    """The weight of `string` in `m` (ε-arcs allowed), by simulating configurations (state,
    whole stack): after the start and after every symbol, the ε-closure of the reachable
    configurations by `closure` (Lehmann) over the finitely many reachable through ε-arcs. The
    reference semantics of `pdanet.automata.weighted` (weight of every string, the empty one
    included) in `semiring` (`m`'s by default), exact in the rational semiring.

    SearchBoundError when ε-arcs reach a stack higher than `max_height` cells above ⊥ (default
    ``len(string) + |Q|·|Γ⊥| + 2``; the configurations reachable by ε-arcs are then possibly
    infinite and this reference does not apply), or more than `max_configs` configurations at
    one position. DivergenceError when a reachable cycle of ε-moves has weights summing to ≥ 1.
    """
    if not isinstance(m, WeightedPDA):
        raise InputError(f"string_weight needs a WeightedPDA, got {type(m).__name__}")
    sr = m.semiring if semiring is None else srm.get(semiring)
    syms = m.alphabet.split(string) if isinstance(string, str) else tuple(string)
    for a in syms:
        m.alphabet.index(a)
    if max_height is None:
        max_height = len(syms) + m.num_states * m.num_stack + 2
    by_src: dict = {}
    for (q, x, a, r, op, y), w in m.transitions.items():
        by_src.setdefault((q, x, a), []).append((r, op, y, _convert(w, m.semiring, sr)))

    def moves(config: tuple, a: Any):
        q, st = config
        for r, op, y, w in by_src.get((q, st[-1], a), ()):
            if op == "push":
                yield (r, st + (y,)), w
            elif op == "replace":
                yield (r, st[:-1] + (y,)), w
            else:
                yield (r, st[:-1]), w

    def eclose(configs: dict) -> dict:
        nodes = list(configs)
        seen = set(nodes)
        edges: list = []
        j = 0
        while j < len(nodes):
            for c2, w in moves(nodes[j], EPSILON):
                if len(c2[1]) - 1 > max_height:
                    raise SearchBoundError(
                        f"string_weight: ε-arcs build a stack of more than {max_height} cells "
                        f"(at {c2[0]!r}); raise max_height if it is bounded")
                if c2 not in seen:
                    seen.add(c2)
                    nodes.append(c2)
                    if len(nodes) > max_configs:
                        raise SearchBoundError(
                            f"string_weight: more than {max_configs} configurations reachable "
                            "by ε-arcs at one position; raise max_configs")
                edges.append((nodes[j], c2, w))
            j += 1
        if not edges:
            return configs
        succ: dict = {}
        for c1, c2, w in edges:
            succ.setdefault(c1, {})
            succ[c1][c2] = sr.plus(succ[c1][c2], w) if c2 in succ[c1] else w
        acc = dict(configs)
        out: dict = {}
        for comp in _sccs(nodes, succ):          # topological order: closure per component
            members = set(comp)
            inside = {c: {d: w for d, w in succ.get(c, {}).items() if d in members}
                      for c in comp}
            if len(comp) == 1 and not inside[comp[0]]:
                vals = {comp[0]: acc.get(comp[0], sr.zero)}
            else:
                pos = {c: k for k, c in enumerate(comp)}
                Ec = sr.array((len(comp), len(comp)))
                for c in comp:
                    for d, w in inside[c].items():
                        Ec[pos[c], pos[d]] = w
                star = closure(Ec, sr, labels=comp)
                vals = {}
                for d in comp:
                    tot = sr.zero
                    for c in comp:
                        if c in acc and not sr.is_zero(star[pos[c], pos[d]]):
                            tot = sr.plus(tot, sr.times(acc[c], star[pos[c], pos[d]]))
                    vals[d] = tot
            for c, v in vals.items():
                if sr.is_zero(v):
                    continue
                out[c] = v
                for d, w in succ.get(c, {}).items():
                    if d not in members:
                        _add(sr, acc, d, sr.times(v, w))
        return out

    configs = eclose({(m.start, (BOTTOM,)): sr.one})
    for a in syms:
        nxt: dict = {}
        for c, v in configs.items():
            for c2, w in moves(c, a):
                _add(sr, nxt, c2, sr.times(v, w))
        configs = eclose(nxt)
    total = sr.zero
    for (q, st), v in configs.items():
        if (m.accepting is None or q in m.accepting) and (not m.empty_stack or st == (BOTTOM,)):
            total = sr.plus(total, v)
    return total


__all__ = ["INIT", "remove_epsilon", "string_weight"]
