"""Hypothesis strategies shared by the test files (imported as ``strategies``: pytest puts
``tests/`` on the path)."""

from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.pda import DPDA


@st.composite
def realtime_dpda(draw, max_states: int = 5, empty_stack: bool = True) -> DPDA:
    """A random real-time DPDA: ≤ ``max_states`` states, ≤ 3 stack symbols, ≤ 3 input symbols,
    each (state, symbol, top) missing or one noop/push/pop/replace (⊥ never popped); final-state
    acceptance, or (when ``empty_stack``, half the time) empty-stack acceptance."""
    nq, ng, nk = draw(st.integers(1, max_states)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    Q, G, K = list(range(nq)), [f"X{i}" for i in range(ng)], "abc"[:nk]
    t = {}
    for q in Q:
        for a in K:
            for x in G + [BOTTOM]:
                kind = draw(st.sampled_from(["none", "noop", "push", "pop", "replace"]))
                q2, y = draw(st.sampled_from(Q)), draw(st.sampled_from(G))
                if kind == "none" or (x is BOTTOM and kind in ("pop", "replace")):
                    continue
                gamma = {"noop": (x,), "push": (y, x), "pop": (), "replace": (y,)}[kind]
                if kind == "replace" and y == x:
                    gamma = (x,)
                t[(q, a, x)] = (q2, gamma)
    if empty_stack and draw(st.booleans()):
        return DPDA(Q, K, G, t, 0, acceptance="empty_stack")
    return DPDA(Q, K, G, t, 0, accepting=draw(st.sets(st.sampled_from(Q))))
