"""Label and field selectors, parsed once per request into predicates over stored objects.

Label selector text follows Kubernetes' grammar: comma-separated requirements ``k=v``,
``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``, ``k>1``, ``k<1``.
``!=`` and ``notin`` also match objects without the label. Field selectors support
``=``, ``==`` and ``!=`` on the fields each kind declares (catalog.ResourceType.fields);
any other field is refused with 400, as the real server does. A missing field reads as
the empty string, so ``spec.nodeName=`` selects unbound pods.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from devcluster.errors import bad_request

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]
LabelTest = Callable[[dict[str, str]], bool]

_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SET_TERM = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_OP_TERM = re.compile(r"^(?P<key>[^=!<>\s]+)\s*(?P<op>==|=|!=|<|>)\s*(?P<value>\S*)$")


def everything(_: Obj) -> bool:
    return True


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


def _check_key(key: str, text: str) -> str:
    if len(key) > 316 or not _KEY.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {text!r}")
    return key


def _check_values(values: Iterable[str], text: str) -> set[str]:
    out = set()
    for value in values:
        if len(value) > 63 or not _VALUE.match(value):
            raise bad_request(f"unable to parse requirement: invalid label value {value!r} in {text!r}")
        out.add(value)
    return out


def requirement(key: str, operator: str, values: Iterable[str] = ()) -> LabelTest:
    """One requirement as a test on a label map; operators as in metav1.LabelSelectorRequirement."""
    wanted = set(values)
    if operator in ("In", "=", "=="):
        return lambda labels: labels.get(key) in wanted
    if operator in ("NotIn", "!="):
        return lambda labels: labels.get(key) not in wanted
    if operator == "Exists":
        return lambda labels: key in labels
    if operator == "DoesNotExist":
        return lambda labels: key not in labels
    if operator in ("Gt", "Lt", ">", "<"):
        bound = int(next(iter(wanted)))
        greater = operator in ("Gt", ">")

        def compare(labels: dict[str, str]) -> bool:
            try:
                value = int(labels[key])
            except (KeyError, ValueError):
                return False
            return value > bound if greater else value < bound

        return compare
    raise bad_request(f"unsupported label selector operator {operator!r}")


def _label_term(term: str, text: str) -> LabelTest:
    if term.startswith("!"):
        return requirement(_check_key(term[1:].strip(), text), "DoesNotExist")
    match = _SET_TERM.match(term)
    if match:
        values = [v.strip() for v in match["values"].split(",") if v.strip()]
        if not values:
            raise bad_request(
                f"unable to parse requirement: for 'in', 'notin' operators, values set can't be empty in {text!r}"
            )
        op = "In" if match["op"] == "in" else "NotIn"
        return requirement(_check_key(match["key"], text), op, _check_values(values, text))
    match = _OP_TERM.match(term)
    if match:
        key, op, value = _check_key(match["key"], text), match["op"], match["value"]
        if op in ("<", ">"):
            if not re.fullmatch(r"-?\d+", value):
                raise bad_request(
                    f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer in {text!r}"
                )
            return requirement(key, op, [value])
        return requirement(key, op, _check_values([value], text))
    if re.fullmatch(r"\S+", term):
        return requirement(_check_key(term, text), "Exists")
    raise bad_request(f"unable to parse requirement: {term!r} in label selector {text!r}")


def _labels_of(obj: Obj) -> dict[str, str]:
    labels: dict[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


def _all_of(tests: list[LabelTest]) -> Predicate:
    if not tests:
        return everything
    if len(tests) == 1:
        only = tests[0]
        return lambda obj: only(_labels_of(obj))
    return lambda obj: all(test(_labels_of(obj)) for test in tests)


def parse_label_selector(text: str | None) -> Predicate:
    """The predicate for a ``labelSelector`` query parameter; 400 when it does not parse."""
    if not text or not text.strip():
        return everything
    return _all_of([_label_term(term, text) for term in _split_terms(text)])


def label_selector_object(selector: Obj | None) -> Predicate | None:
    """The predicate for a metav1.LabelSelector (matchLabels + matchExpressions).

    None for a nil selector (which selects nothing); an empty selector selects everything.
    """
    if selector is None:
        return None
    tests = [requirement(k, "In", [v]) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        tests.append(requirement(str(expr.get("key", "")), str(expr.get("operator", "")), expr.get("values") or ()))
    return _all_of(tests)


def field_value(obj: Obj, path: str) -> str:
    """A field as the server compares it: missing is "", booleans are "true"/"false"."""
    if path == "source":  # core events expose source.component under this name
        path = "source.component"
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _split_unescaped(text: str, sep: str) -> list[str]:
    return re.split(rf"(?<!\\){re.escape(sep)}", text)


def parse_field_selector(text: str | None, allowed: frozenset[str], resource: str) -> Predicate:
    """The predicate for a ``fieldSelector`` query parameter over the fields ``allowed``."""
    if not text or not text.strip():
        return everything
    tests: list[Predicate] = []
    for term in _split_unescaped(text, ","):
        term = term.strip()
        if not term:
            continue
        match = re.match(r"^(?P<path>[^=!]+?)\s*(?P<op>!=|==|=)(?P<value>.*)$", term)
        if not match:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        path, equal, value = match["path"].strip(), match["op"] != "!=", _unescape(match["value"].strip())
        if path not in allowed:
            raise bad_request(
                f'Unable to find "{resource}" that match label selector "", field selector "{text}": '
                f"field label not supported: {path}"
            )
        tests.append(_field_test(path, value, equal))
    if not tests:
        return everything
    return lambda obj: all(test(obj) for test in tests)


def _field_test(path: str, value: str, equal: bool) -> Predicate:
    if path == "metadata.name":  # the common case, kept cheap
        return lambda obj: (obj["metadata"].get("name") == value) == equal
    return lambda obj: (field_value(obj, path) == value) == equal


def both(first: Predicate, second: Predicate) -> Predicate:
    if first is everything:
        return second
    if second is everything:
        return first
    return lambda obj: first(obj) and second(obj)
