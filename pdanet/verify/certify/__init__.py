"""One certifier core, one module per family of network.

`certify` chooses the family by the type of the network's abstraction (`FAMILIES`):

- `box` — `RecurrentUnits` (DFA Minsky Elman/LSTM): box induction over explored
  (configuration, state) pairs;
- `dyck` — `DyckSlots` (Dyck-(k, m) Elman/LSTM): local views for machines too large to
  enumerate, else `box`;
- `compact` — `CompactSlots` (depth-bounded DPDAs/DPDTs, compact Elman/LSTM): local views per
  lookup unit and slot, ideal values from the machine's own table, else `box`;
- `stack` — `ControllerMemory` (stack RNNs): exact saturation and the memory lemma;
- `ns` — `NSChart` (NS-RNN): a bounded-length reading error;
- `grefenstette` — `GrefenstetteController` (Grefenstette et al.'s RNN/LSTM controllers with
  stack, queue or deque): exact heads and pushed codes, the data path boxed, the store lemma of
  each store's equations;
- `paper` — `PaperController` (Hao et al.'s LSTM and linear controllers, Joulin–Mikolov):
  exact saturation of the paper's heads, the memory lemma;
- `suzgun` — `SuzgunController`, `BabyNTMController` (Suzgun et al.'s Stack-RNN/LSTM, both
  readouts, and Baby-NTM): one-hot softmax actions from the scanned exp underflow, the
  superposition memory lemma (Baby-NTM: its finite memory explored exactly);
- `dusell` — `NSController` (DuSell & Chiang's LSTM with NS, NS+S, NS+U, RNS): one-hot action
  weights, a single run in the chart; every length for NS+U and RNS, a stated length for NS and
  NS+S (Eq. 1's unoccupied rows carry rounding that grows with the length);
- `lm` — `LMUnits` (RNN language models of PFSAs): box induction, then a bound on the
  log-probability error in nats per symbol.

What they share is written once: `core` (`Certificate`, `FailingCase`, argument and pair checks,
non-finite guards, the cap search and the kernel-model retry) and `induction` (the radius fixed
point and the LSTM drift bound). A family supplies only its step enclosure and invariant; the
kernel model is passed to `pdanet.verify.intervals` as a value, never set globally.
"""

from __future__ import annotations

from pdanet.verify.certify.core import Certificate, FailingCase
from pdanet.verify.certify.dispatch import FAMILIES, certify, family
from pdanet.verify.certify.scale import min_scale

certify.min_scale = min_scale  # type: ignore[attr-defined]

__all__ = ["FAMILIES", "Certificate", "FailingCase", "certify", "family", "min_scale"]
