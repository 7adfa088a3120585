"""The source papers' own models as trainable torch modules, each with the compile function
that emits weights for exactly that module: ``pn.compile(machine, target="stack_rnn",
model=NAME)`` (Hao et al.'s buffered model: target ``"buffered_stack_rnn"``; DuSell & Chiang's:
``"ns_rnn"``).

==============================  =================================================================
model                           module (paper)
==============================  =================================================================
``grefenstette_rnn`` / ``_lstm``  `GrefenstetteRNN` — RNN/LSTM controller, neural Stack, Queue or
                                DeQue (Grefenstette et al. 2015)
``hao_linear`` / ``hao_lstm``   `HaoStackRNN` — linear or LSTM controller (Hao et al. 2018)
``hao_buffered``                `HaoBufferedStackRNN` — input and output buffers (Hao et al. 2018)
``suzgun_stack_rnn`` / ``_lstm``  `SuzgunStackRNN`, `SuzgunStackLSTM` (Suzgun et al. 2019)
``suzgun_baby_ntm``             `SuzgunBabyNTM` — fixed memory rows (Suzgun et al. 2019):
                                depth-bounded machines and DFAs
``joulin_mikolov_stack_rnn``    `JoulinMikolovStackRNN` — the original Stack-RNN (Joulin &
                                Mikolov 2015)
``dusell_chiang_<variant>``      `DuSellChiangRNN` — LSTM controller, nondeterministic stack
                                (variant ``ns``, ``ns_s``, ``ns_u``, ``rns``), optional window D
                                (DuSell & Chiang 2021); target ``"ns_rnn"``
==============================  =================================================================

Each module starts from a random initialisation (as its paper trains it) when built directly;
the compile functions set its weights by hand (heads saturated by β) and return a
`CompiledNetwork` that `pn.verify` checks. Precondition ``requires_<model>`` says why a machine
does not compile (naming the model that can); ``EXAMPLE_<MODEL>`` is a machine each accepts.
"""

from pdanet.models.dusell_chiang import (
    DuSellChiangRNN,
    compile_dusell_chiang_ns,
    compile_dusell_chiang_ns_s,
    compile_dusell_chiang_ns_u,
    compile_dusell_chiang_rns,
)
from pdanet.models.grefenstette import (
    GrefenstetteRNN,
    compile_grefenstette_lstm,
    compile_grefenstette_rnn,
)
from pdanet.models.hao import (
    HaoBufferedStackRNN,
    HaoStackRNN,
    compile_hao_buffered,
    compile_hao_linear,
    compile_hao_lstm,
)
from pdanet.models.joulin_mikolov import JoulinMikolovStackRNN, compile_joulin_mikolov_stack_rnn
from pdanet.models.suzgun import (
    SuzgunBabyNTM,
    SuzgunStackLSTM,
    SuzgunStackRNN,
    compile_suzgun_baby_ntm,
    compile_suzgun_stack_lstm,
    compile_suzgun_stack_rnn,
)

__all__ = [
    "DuSellChiangRNN",
    "GrefenstetteRNN",
    "HaoBufferedStackRNN",
    "HaoStackRNN",
    "JoulinMikolovStackRNN",
    "SuzgunBabyNTM",
    "SuzgunStackLSTM",
    "SuzgunStackRNN",
    "compile_dusell_chiang_ns",
    "compile_dusell_chiang_ns_s",
    "compile_dusell_chiang_ns_u",
    "compile_dusell_chiang_rns",
    "compile_grefenstette_lstm",
    "compile_grefenstette_rnn",
    "compile_hao_buffered",
    "compile_hao_linear",
    "compile_hao_lstm",
    "compile_joulin_mikolov_stack_rnn",
    "compile_suzgun_baby_ntm",
    "compile_suzgun_stack_lstm",
    "compile_suzgun_stack_rnn",
]
