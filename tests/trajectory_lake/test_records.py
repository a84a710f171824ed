"""records.make_step: a step row's fields are checked against their columns' types (adapters quarantine what
fails, with the field named), also where the check is skipped for values of the column's exact type."""

from __future__ import annotations

import pytest

from trajectory_lake.records import make_step

TRAJECTORY = {"trajectory_id": "t", "run_id": "r", "task_id": "k", "domain": "swe", "benchmark": None}


class _Text(str):
    pass


class TestMakeStepChecks:
    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("tokens", True, "step 3: tokens must be an integer, got True"),
            ("tokens", "12", "step 3: tokens must be an integer, got str"),
            ("is_error", 1, "step 3: is_error must be true or false, got 1"),
            ("reasoning", ["a"], "step 3: reasoning must be a string, got list"),
            ("tool_call_id", 7, "step 3: tool_call_id must be a string, got 7"),
        ],
    )
    def test_a_value_of_the_wrong_type_is_refused_naming_the_step_and_field(self, field, value, message):
        with pytest.raises(ValueError, match=f"^{message}$"):
            make_step(TRAJECTORY, 3, role="assistant", content=None, **{field: value})

    def test_values_that_fit_are_kept_as_given(self):
        row = make_step(TRAJECTORY, 0, role="assistant", content="c", reasoning=_Text("r"), tool_call_id="c1",
                        is_error=False, tokens=0, extra={"a": 1})

        kept = (row["reasoning"], row["tool_call_id"], row["is_error"], row["tokens"])
        assert kept == ("r", "c1", False, 0)
        assert isinstance(row["reasoning"], _Text) and row["extra"] == '{"a":1}'

    def test_unset_values_stay_null(self):
        row = make_step(TRAJECTORY, 0, role="user", content=None)

        assert [row[k] for k in ("reasoning", "tool_call_id", "is_error", "tokens", "extra")] == [None] * 5
