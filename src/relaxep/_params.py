"""A small mixin giving configuration objects scikit-learn style parameters.

Likelihoods and site rules are immutable-in-spirit configuration: their
constructor arguments are their parameters, so ``GPClassifier(rule=RelaxedEP(c=1))``
exposes ``rule__c`` to ``GridSearchCV`` and ``clone``.
"""

from __future__ import annotations

import inspect
from typing import Any


class ParamsMixin:
    """``get_params``/``set_params``, ``repr``, equality and hashing from ``__init__``'s arguments."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [
            name
            for name, p in sig.parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters by name."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> ParamsMixin:
        """Set parameters; re-runs ``__init__`` so every value is validated again."""
        unknown = set(params) - set(self._param_names())
        if unknown:
            raise ValueError(f"invalid parameter(s) {sorted(unknown)} for {type(self).__name__}")
        self.__init__(**{**self.get_params(), **params})  # type: ignore[misc]
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.get_params() == other.get_params()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.get_params().items()))))
