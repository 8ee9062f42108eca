"""Kubernetes quantities: the exact values and the canonical form the apiserver stores
(k8s.io/apimachinery resource.Quantity), so a quantity read back is compared by value."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from nsq_operator import quantity
from nsq_operator.kube.apply import contains, immutable_changes

# resource.Quantity's own examples (quantity_test.go) and what the issue saw on a cluster
CANONICAL = [
    ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"), ("0.5Gi", "512Mi"), ("1536Mi", "1536Mi"), ("1000", "1k"),
    ("0.5", "500m"), ("1.5", "1500m"), ("100m", "100m"), ("0", "0"), ("0Gi", "0"), ("-1.5Gi", "-1536Mi"), ("1.5Ki", "1536"),
    ("0.1n", "1n"), ("-0.1n", "-1n"), (".5", "500m"), ("1.", "1"), ("+5", "5"), ("1E", "1E"), ("2048", "2048"),
    ("1Ki", "1Ki"), ("0.1Ki", "102400m"), ("512Ki", "512Ki"), ("1.0001Ki", "1024102400u"), ("1e3", "1e3"),
    ("1000e0", "1e3"), ("129e6", "129e6"), ("129e+6", "129e6"), ("128974848", "128974848"), ("1e-3", "1e-3"),
    ("10Gi", "10Gi"), ("128Mi", "128Mi"), ("1000Mi", "1000Mi"), ("1000M", "1G"), ("0.001k", "1"), (2, "2"),
]


@pytest.mark.parametrize("given, stored", CANONICAL)
def test_the_apiserver_stores_quantities_canonical(given: str | int, stored: str) -> None:
    assert quantity.canonical(given) == stored


@pytest.mark.parametrize("bad", ["", "Gi", "1.5.5", "1 Gi", "1gi", "1e", "1Ki5", "ten", "--1", True])
def test_what_is_not_a_quantity_is_refused(bad: object) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(bad)  # type: ignore[arg-type]


SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "e0", "e3", "e-3", "e6", "e-9", "e2", "e+1"]


@st.composite
def quantities(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "", "-", "+"]))
    whole = draw(st.integers(min_value=0, max_value=10**6))
    fraction = draw(st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=4).map(lambda d: "." + d)))
    return f"{sign}{whole}{fraction}{draw(st.sampled_from(SUFFIXES))}"


@given(quantities())
def test_the_canonical_form_keeps_the_value_and_is_its_own_canonical_form(text: str) -> None:
    stored = quantity.canonical(text)
    assert quantity.value(stored) == quantity.value(text)
    assert quantity.canonical(stored) == stored
    assert "." not in stored and not stored.startswith("+")


@given(quantities())
def test_the_canonical_suffix_is_the_largest_that_keeps_the_number_whole(text: str) -> None:
    stored = quantity.canonical(text)
    amount, fmt = quantity.parse(stored)
    mantissa = int(stored.lstrip("-").rstrip("numkMGTPEKi").split("e")[0])
    if amount == 0:
        assert stored == "0"
    elif stored.endswith("i"):
        assert fmt == "BinarySI" and (mantissa % 1024 != 0 or stored.endswith("Ei"))
    elif fmt == "DecimalSI":
        assert mantissa % 1000 != 0 or stored.endswith("E")
    if quantity.parse(text)[1] == "BinarySI" and amount != 0:
        # a binary suffix only for whole multiples of 1024: 1.5Ki is stored as 1536, as Kubernetes does
        assert stored.endswith("i") == (amount.denominator == 1 and amount % 1024 == 0)


@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["Ki", "Mi", "Gi"]))
def test_binary_amounts_written_two_ways_are_the_same(n: int, suffix: str) -> None:
    smaller = {"Ki": "", "Mi": "Ki", "Gi": "Mi"}[suffix]
    assert quantity.same(f"{n}{suffix}", f"{n * 1024}{smaller}")
    assert quantity.value(f"{n}{suffix}") == Fraction(n) * 1024 ** (["Ki", "Mi", "Gi"].index(suffix) + 1)


def test_a_claim_template_read_back_canonical_is_no_change() -> None:
    def sts(size: str, memory: str) -> dict:
        return {"kind": "StatefulSet", "spec": {
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                      "spec": {"resources": {"requests": {"storage": size}}}}],
            "template": {"spec": {"containers": [{"resources": {"limits": {"memory": memory}}}]}}}}
    assert immutable_changes(sts("1536Mi", "1Gi"), sts("1.5Gi", "1024Mi")) == []
    assert immutable_changes(sts("1536Mi", "1Gi"), sts("2Gi", "1024Mi")) == ["volumeClaimTemplates"]
    assert contains(sts("1536Mi", "1Gi"), sts("1.5Gi", "1024Mi"))
    assert not contains({"name": "1k"}, {"name": "1000"})  # only quantities are compared by value
