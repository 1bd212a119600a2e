#!/usr/bin/env python3
"""Renders extra_cases.json with the official SmolLM3 template and Python's jinja2.

The fixtures in cases.json cover the common paths; the cases here pin the corners a
hand-written renderer can get wrong (Python repr of tool definitions, /system_override with
tools, later system messages, null content, Unicode whitespace in rstrip). Expected strings
come from jinja2 itself, set up the way transformers renders chat templates
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, a {% generation %} tag that only
marks its body), so they are derived independently of the C++ renderer.

Before writing anything the script re-renders every case of cases.json and checks it matches,
which shows this jinja2 set-up is the one the fixtures were made with.

Usage: python3 make_extra_cases.py   (run from any directory; writes next to this file)
"""
import json
import pathlib

from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %} renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body).set_lineno(lineno)


def render(template, case):
    kwargs = {
        "messages": case["messages"],
        "add_generation_prompt": case["add_generation_prompt"],
        "strftime_now": lambda fmt: case["date"],
    }
    for key in ("enable_thinking", "xml_tools", "python_tools"):
        if key in case:
            kwargs[key] = case[key]
    return template.render(**kwargs)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag])
    template = env.from_string((HERE / "smollm3-official.jinja").read_text(encoding="utf-8"))

    fixtures = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
    for case in fixtures:
        got = render(template, case)
        if got != case["expected"]:
            raise SystemExit(f"jinja2 set-up does not reproduce fixture {case['name']!r}")

    date = "21 November 2026"
    weather = {"type": "function",
               "function": {"name": "get_weather", "description": "Current weather",
                            "parameters": {"type": "object",
                                           "properties": {"city": {"type": "string"}},
                                           "required": ["city"]}}}
    tricky = {
        "name": "it's",
        "both": "say \"hi\" it's",
        "dq": "say \"hi\"",
        "backslash": "C:\\path\\n",
        "controls": "tab\there\nnl\rcr\x01\x1f\x7f",
        "latin": "café naïve",
        "nbsp_zwsp": "a\u00a0b\u200bc\u2028d\ufeff",
        "emoji": "😀 你好",
        "c1": "\x85\x9f",
        "private": "\ue000\U000f0000",
        "ints": [0, -7, 42, 9007199254740993, 18446744073709551615],
        "floats": [0.1, -0.0, 1.5, 100.0, 1e-05, 0.0001, 1e16, 1e15, 123456789.125,
                   2.5e-7, 1.7976931348623157e308, 5e-324, -3.25e22, 0.30000000000000004],
        "flags": [True, False, None],
        "empty": {"d": {}, "l": [], "s": ""},
        "nested": [[1, [2, {"k'ey": "v"}]], {"a": {"b": None}}],
        "zebra_key_first": 1,
    }
    cases = [
        {"name": "override_with_tools_and_no_think",
         "messages": [{"role": "system", "content": "/system_override /no_think Be X.  \n"},
                      {"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello"},
                      {"role": "user", "content": "Again"}],
         "xml_tools": [weather], "add_generation_prompt": True},
        {"name": "later_system_message_skipped",
         "messages": [{"role": "user", "content": "Hi"},
                      {"role": "system", "content": "ignored /no_think"},
                      {"role": "user", "content": "Again"}],
         "add_generation_prompt": True},
        {"name": "xml_and_python_tools",
         "messages": [{"role": "system", "content": "Use tools. /think"},
                      {"role": "user", "content": "Go"}],
         "enable_thinking": False,
         "xml_tools": [weather, "plain string tool"], "python_tools": [weather],
         "add_generation_prompt": True},
        {"name": "python_repr_corners",
         "messages": [{"role": "user", "content": "x"}],
         "xml_tools": [tricky, 3, 2.5, True, None, ["a", "b'"]],
         "add_generation_prompt": True},
        {"name": "empty_tool_lists",
         "messages": [{"role": "user", "content": "x"}],
         "xml_tools": [], "python_tools": [], "add_generation_prompt": True},
        {"name": "null_assistant_content_no_think",
         "messages": [{"role": "user", "content": "call it"},
                      {"role": "assistant", "content": None},
                      {"role": "tool", "content": "42"},
                      {"role": "assistant", "content": "\n\nIt is 42."}],
         "enable_thinking": False, "add_generation_prompt": False},
        {"name": "empty_system_content",
         "messages": [{"role": "system", "content": ""},
                      {"role": "user", "content": "x"}],
         "enable_thinking": False, "add_generation_prompt": True},
        {"name": "both_flags_no_think_wins",
         "messages": [{"role": "system", "content": "/think and /no_think"},
                      {"role": "user", "content": "x"}],
         "add_generation_prompt": True},
        {"name": "unicode_whitespace_rstrip",
         "messages": [{"role": "system", "content": "Hi\u3000\u00a0\u2029\x1c \t\n\u200b\u3000"},
                      {"role": "user", "content": "x"}],
         "add_generation_prompt": True},
        {"name": "flag_inside_word",
         "messages": [{"role": "system", "content": "see /thinking/no_thinker"},
                      {"role": "user", "content": "x"}],
         "enable_thinking": False, "add_generation_prompt": True},
        {"name": "first_message_assistant",
         "messages": [{"role": "assistant", "content": "I start."},
                      {"role": "user", "content": "ok"}],
         "add_generation_prompt": True},
    ]
    for case in cases:
        case["date"] = date
        case["expected"] = render(template, case)

    out = HERE / "extra_cases.json"
    out.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"checked {len(fixtures)} fixtures, wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
