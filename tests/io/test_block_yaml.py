"""The fast reader of plain block YAML reads what PyYAML reads, or hands the text to PyYAML.

PyYAML is the reference throughout: whatever the fast reader returns must equal what PyYAML
loads from the same text (compared by ``repr``, so types and key order count too), and a
text PyYAML refuses must never be read by it.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai_ray.errors import InputError
from kai_ray.io import documents
from kai_ray.io.block_yaml import read_block_yaml
from tests import manifests as M

LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
REPO = Path(__file__).resolve().parents[2]
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pyyaml(text: str) -> list[Any] | None:
    """PyYAML's documents (empty ones left out, as the snapshot reader does), or None if it refuses."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=LOADER) if doc is not None]
    except yaml.YAMLError:
        return None


def assert_agrees(text: str) -> list[Any] | None:
    """The fast reader's documents, after checking them against PyYAML's."""
    fast = read_block_yaml(text)
    if fast is not None:
        expected = pyyaml(text)
        assert expected is not None, f"read a text PyYAML refuses:\n{text}"
        assert repr(fast) == repr(expected), text
    return fast


KUBECTL_POD = """\
apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"train-0"}}
    pod-group-name: train
  creationTimestamp: "2025-01-01T10:00:00Z"
  labels:
    kai.scheduler/queue: team-a
    "on": "yes"
  name: train-0
  namespace: ml
  resourceVersion: "4711"
  uid: 0b5c0a8e-5b5e-4f6b-9d1e-1a2b3c4d5e6f
spec:
  containers:
  - args:
    - --epochs=3
    - --lr
    - "0.01"
    image: registry.example/train:1.0
    name: main
    resources:
      limits:
        nvidia.com/gpu: "1"
      requests:
        cpu: 500m
        memory: 4Gi
        nvidia.com/gpu: "1"
  # kubectl never writes comments, people do
  nodeSelector: {}
  schedulerName: kai-scheduler
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
status:
  conditions:
  - lastProbeTime: null
    message: '0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3
      nodes are available: 3 No preemption victims found for incoming pod.'
    reason: Unschedulable
    status: "False"
    type: PodScheduled
  phase: Pending
  qosClass: Burstable
"""


def test_a_pod_as_kubectl_prints_it_is_read_fast() -> None:
    fast = assert_agrees(KUBECTL_POD)
    assert fast is not None
    pod = fast[0]
    assert pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].endswith("}}\n")
    assert pod["metadata"]["labels"]["on"] == "yes"
    assert pod["status"]["conditions"][0]["message"].startswith("0/3 nodes are available: 3 Insufficient")


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: yes\nc: on\nd: 0o17\ne: 0x1F\nf: 1:30\ng: 1_000\nh: ~\ni: 2024-01-01\nj: 2024-01-01T10:00:00Z\n",
        "a: .nan\nb: -.inf\nc: 1e3\nd: 1.5\ne: '1.5'\nf: \"true\"\ng: ''\nh: \"\"\n",
        "true: x\n1: y\nnull: z\n'quoted key': 1\n\"double key\": 2\n",
        "items:\n- a\n- b: 1\n  c: 2\n- - x\n  - y\n-\n  z: 3\n-\n- []\n- {}\n",
        "a:\n  b:\n    c:\n    - 1\n    - 2\n  d: e\nf: g\n",
        "- a\n- b\n",
        "---\na: 1\n---\n---\nb: 2\n",
        "# a comment\na: 1\n  # an indented comment\nb:\n  # before the block\n  c: 2\n",
        "a: |\n  line one\n\n  line three\nb: |-\n  kept\n    indented\nc: |\n\nd: x\n",
        "a: 'it''s'\nb: 'folded\n  over two lines'\nc: plain text\n  folded over\n  three lines\n",
        "a:   spaced value   \nb :  c\n",
        "-   a: 1\n    b: 2\n",
        "key with spaces: value with spaces\nurl: http://example.com:8080/x?y=z#frag\n",
        "a: -1\nb: --flag\nc: ---\nd: a#b\n",
    ],
)
def test_texts_in_the_block_style_are_read_as_pyyaml_reads_them(text: str) -> None:
    assert assert_agrees(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # anchors and aliases
        "a: !!str 1\n",  # tags
        "a: [1, 2]\n",  # flow collections
        "a: {b: 1}\n",
        "a: 1 # a comment after a value\n",
        "a:\t1\n",  # tabs
        "<<: {a: 1}\n",  # a merge key
        "a: =\n",  # the value key
        "a: 1\n...\n",  # a document end marker
        "%YAML 1.1\n---\na: 1\n",  # a directive
        "--- a: 1\n",  # content after the marker
        "a: >\n  folded\n",  # folded block scalars
        "a: |+\n  kept\n",  # kept trailing lines
        "a: |2\n   indented\n",  # an explicit indentation indicator
        "a: |\n  no line break at the end",
        'a: "escaped\\tquote"\n',  # escapes in double quotes
        'a: "two\n  lines"\n',  # double quotes over lines
        "a: 1\r\nb: 2\r\n",  # carriage returns
        "\ufeffa: 1\n",  # a byte-order mark
        "? complex\n: key\n",
        "k" * 1100 + ": 1\n",  # a key longer than PyYAML's simple keys
        "just a scalar\n",
        "- a\nb: 1\n",  # a structure PyYAML refuses
        "a: 1\n  b: 2\n",
        "a: b: c\n",
        "a:\n  - 1\n  b: 2\n",
    ],
)
def test_anything_else_is_left_to_pyyaml(text: str) -> None:
    assert read_block_yaml(text) is None


def test_the_snapshot_reader_reads_the_same_with_and_without_the_fast_reader() -> None:
    paths = [p for p in (REPO / "examples").rglob("*.yaml")] + [p for p in (REPO / "tests").rglob("*.yaml")]
    texts = [p.read_text(encoding="utf-8") for p in paths]
    texts.append(yaml.safe_dump_all([M.node("n1"), M.queue("q"), M.pod_group("g", "q"), M.pod("p", "q", group="g")]))
    for text in texts:
        fast = _parse_or_error(text)
        with mock.patch.object(documents, "read_block_yaml", return_value=None):
            slow = _parse_or_error(text)
        assert repr(fast) == repr(slow)


def _parse_or_error(text: str) -> Any:
    try:
        return documents.parse_documents(text, "snapshot.yaml")
    except InputError as exc:
        return str(exc)


# ---------------------------------------------------------------- properties

PLAIN_CHARACTERS = string.ascii_letters + string.digits + " -_./:"
SCALAR_TEXTS = st.one_of(
    st.text(alphabet=PLAIN_CHARACTERS, max_size=30),
    st.text(alphabet=string.printable, max_size=20),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    st.sampled_from(["yes", "No", "on", "~", "null", "0o17", "0x1F", "1:30", "2024-01-01", ".nan", "-", "---", "="]),
)
PLAIN_KEYS = st.text(alphabet=PLAIN_CHARACTERS, min_size=1, max_size=20)
KEYS = st.one_of(PLAIN_KEYS, SCALAR_TEXTS, st.integers(), st.booleans())
SCALARS = st.one_of(SCALAR_TEXTS, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=20,
)
DOCUMENTS = st.lists(st.dictionaries(KEYS, VALUES, min_size=1, max_size=5), min_size=1, max_size=3)


@PROPERTY
@given(DOCUMENTS, st.integers(20, 160), st.integers(2, 4), st.booleans(), st.booleans())
def test_what_pyyaml_writes_is_read_as_pyyaml_reads_it(
    docs: list[Any], width: int, indent: int, explicit_start: bool, unicode: bool
) -> None:
    text = yaml.safe_dump_all(docs, width=width, indent=indent, explicit_start=explicit_start, allow_unicode=unicode)
    assert_agrees(text)


ORDINARY_TEXT = st.text(alphabet=string.ascii_lowercase + string.digits + "-./", min_size=1, max_size=16)
ORDINARY_KEYS = st.builds(
    str.__add__,
    st.sampled_from(string.ascii_lowercase),
    st.text(string.ascii_letters + string.digits + "./-", max_size=12),
)
ORDINARY = st.recursive(
    st.one_of(ORDINARY_TEXT, st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(ORDINARY_KEYS, inner, max_size=4)),
    max_leaves=20,
)


@PROPERTY
@given(st.dictionaries(ORDINARY_KEYS, ORDINARY, min_size=1))
def test_ordinary_manifests_are_read_fast(doc: dict[str, Any]) -> None:
    """Names, numbers, flags and nesting as manifests have them take the fast way."""
    assert assert_agrees(yaml.safe_dump(doc)) is not None
    assert assert_agrees(kubectl_style(doc)) is not None


@PROPERTY
@given(DOCUMENTS, st.integers(20, 100), st.randoms(use_true_random=False))
def test_what_kubectl_writes_is_read_as_pyyaml_reads_it(docs: list[Any], width: int, rng: Any) -> None:
    text = "---\n".join(kubectl_style(doc, width, comment=lambda: rng.random() < 0.1) for doc in docs)
    assert_agrees(text)


EDITS = [" ", "  ", "\n", ":", ": ", "- ", "-", "#", " #", "'", "''", '"', "|", "|-", ">", "{}", "[", "&a ", "*a", "!"]
EDITS += ["---\n", "...\n", "\n  ", "\n- ", "\n    x", "x", "\t", "?", "%", "@", "<<: ", "="]


EDIT = st.tuples(st.floats(0, 1), st.integers(0, 3), st.sampled_from(EDITS))  # where, how, what


@settings(PROPERTY, max_examples=400)
@given(DOCUMENTS, st.lists(EDIT, min_size=1, max_size=4))
def test_edited_texts_are_read_as_pyyaml_reads_them_or_not_at_all(docs: list[Any], edits: list[Any]) -> None:
    text = kubectl_style(docs[0]) if len(docs) % 2 else yaml.safe_dump_all(docs)
    for where, how, insert in edits:
        at = int(where * len(text))
        if how == 0:
            text = text[:at] + insert + text[at:]
        elif how == 1:
            text = text[:at] + text[at + 1 :]
        elif how == 2:
            text = text[:at] + insert + text[at + 1 :]
        else:
            lines = text.split("\n")
            line = int(where * (len(lines) - 1))
            lines.insert(line, lines[line])
            text = "\n".join(lines)
    assert_agrees(text)


def kubectl_style(value: Any, width: int = 80, comment: Any = lambda: False) -> str:
    """YAML the way kubectl prints it: keys at their block's indent, sequences at their key's,
    double quotes where a plain scalar would mean something else, ``|`` for text with line
    breaks, long text folded over lines, and (for the tests) comment lines here and there."""
    lines: list[str] = []
    _emit(value, 0, lines, width, comment)
    return "\n".join(lines) + "\n"


def _emit(value: Any, indent: int, lines: list[str], width: int, comment: Any, prefix: str = "") -> None:
    pad = " " * indent
    if isinstance(value, dict) and value:
        for i, (key, item) in enumerate(value.items()):
            if comment():
                lines.append(pad + "# note")
            head = ((prefix or pad) if i == 0 else pad) + _scalar_text(key) + ":"
            _emit_entry(head, item, indent, lines, width, comment, entry_indent=indent)
    elif isinstance(value, list) and value:
        for item in value:
            _emit_entry((prefix or pad) + "-", item, indent, lines, width, comment, entry_indent=indent, dash=True)
            prefix = ""
    else:
        lines.append(prefix + _scalar_text(value))


def _emit_entry(
    head: str, item: Any, indent: int, lines: list[str], width: int, comment: Any, entry_indent: int, dash: bool = False
) -> None:
    if dash and isinstance(item, dict | list) and item:
        _emit(item, entry_indent + 2, lines, width, comment, prefix=head + " ")
    elif isinstance(item, dict) and item:
        lines.append(head)
        _emit(item, indent + 2, lines, width, comment)
    elif isinstance(item, list) and item:
        lines.append(head)
        _emit(item, indent, lines, width, comment)
    elif isinstance(item, str) and "\n" in item and item.strip("\n") and not item.startswith(" "):
        lines.append(head + (" |" if item.endswith("\n") else " |-"))
        lines.extend(" " * (indent + 2) + line if line else "" for line in item.rstrip("\n").split("\n"))
    else:
        text = _scalar_text(item)
        if len(head) + len(text) > width and " " in text and not text.startswith('"'):
            first, *rest = _wrap(text, width - len(head))
            lines.append(head + " " + first)
            lines.extend(" " * (indent + 2) + part for part in rest)
        else:
            lines.append(head + " " + text)


def _wrap(text: str, width: int) -> list[str]:
    words, out, line = text.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    out.append(line)
    return out


def _scalar_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return "{}" if isinstance(value, dict) else "[]"
    if not isinstance(value, str):
        return json.dumps(value)
    try:
        plain = yaml.load(f"k: {value}", Loader=LOADER)
    except yaml.YAMLError:
        plain = None
    if isinstance(plain, dict) and plain.get("k") == value and value == value.strip() and "  " not in value:
        return value
    return json.dumps(value, ensure_ascii=False)
