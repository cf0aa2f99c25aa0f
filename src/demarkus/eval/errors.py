"""The evaluation's errors, a branch of the one tree in `demarkus.errors`.

```
DemarkusError
└── EvalError
    ├── RunRefused     a run must not start (raised before any attempt, or by a paid run without --approve)
    └── Refused        two reports may not be compared by the rule asked for
```

They live apart from the runner and the readers so that both raise them without
importing each other.
"""

from __future__ import annotations

from ..errors import DemarkusError


class EvalError(DemarkusError):
    """Base of the evaluation's errors; the message says what is wrong and what to do."""


class RunRefused(EvalError):
    """The run must not start (the message says why and what to do)."""


class Refused(EvalError):
    """The two reports may not be compared this way; the message says why."""
