r"""examples/math_agent.py's grading: the last \boxed{} of an answer (braces matched, cut-off ones not read), the
task's answer as GSM8K's and MATH's files give it, and the comparison (numbers as numbers, text as text); its
options, and the messages an episode sends.
Usage: math_agent_test.py SOURCE_DIR"""
import os
import sys
import unittest

os.environ.update(OPENAI_BASE_URL="http://127.0.0.1:1/v1", ARCLIGHT_STORE_URL="http://127.0.0.1:1", OPENAI_API_KEY="k")
sys.path.insert(0, os.path.join(sys.argv.pop(1), "examples"))
sys.dont_write_bytecode = True
import math_agent  # noqa: E402


class Grading(unittest.TestCase):
    def test_the_last_boxed_answer_with_its_braces_matched(self):
        self.assertEqual(math_agent.last_boxed(r"so \boxed{3} or rather \boxed{\frac{1}{2}}."), r"\frac{1}{2}")
        self.assertEqual(math_agent.last_boxed(r"\fbox{x^{2}}"), "x^{2}")
        self.assertIsNone(math_agent.last_boxed("no box, the answer is 4"))
        self.assertIsNone(math_agent.last_boxed(r"\boxed{\frac{1}{2"))  # cut off by max_tokens
        self.assertEqual(math_agent.last_boxed(r"so $\boxed 5$."), "5")  # MATH writes some without braces

    def test_the_tasks_answer_from_gsm8k_and_math(self):
        self.assertEqual(math_agent.expected_answer({"question": "q", "answer": "48 / 2 = 24\n#### 1,024"}), " 1,024")
        self.assertEqual(math_agent.expected_answer({"question": "q", "answer": 72}), "72")
        self.assertEqual(math_agent.expected_answer({"problem": "p", "solution": r"Thus $\boxed{\sqrt{2}}$."}),
                         r"\sqrt{2}")
        with self.assertRaises(ValueError):  # a data error fails the episode, never a silent 0
            math_agent.expected_answer({"problem": "p", "solution": "no box"})

    def test_numbers_compare_as_numbers_and_the_rest_as_text(self):
        for given, expected in [("1,024", " 1024"), ("1000.0", "1000"), (r"\frac{1}{2}", "0.5"),
                                (r"\dfrac{3}{4}", "3/4"), ("-7", "-7.00"), (r"\text{ 18 }", "18"), (r"\$5", "5"), (r"\sqrt{2}", r"\sqrt {2}"),
                                ("x+1", "x + 1"), ("72 dollars", "72"), (r"72\text{ dollars}", "72"), (r"72\%", "72"),
                                ("x = 5", "5"), ("1{,}000", "1000"), (r"1\,000", "1000"), (r"\frac12", "0.5"),
                                (r"\frac{-1}{2}", "-0.5"), ("+5", "5"), (r"90^\circ", "90"), (r"\textbf{5}", "5"),
                                (r"\dfrac{\sqrt3}{2}", r"\frac{\sqrt3}{2}"), ("1,000,000", "1000000"), ("5.", "5")]:
            self.assertTrue(math_agent.same_answer(given, expected), (given, expected))
        # Wrong ones: a list is no number with thousands; no symbolic algebra; "5x" is no 5 with a unit.
        for given, expected in [("1024", "1025"), ("1,02", "102"), (r"\frac{1}{3}", "0.33"), ("2, 100", "2100"),
                                ("1 2", "12"), ("5x", "5"), ("1/0", "1/0.0"), ("", "0"), ("1.5/2", "0.75")]:
            self.assertFalse(math_agent.same_answer(given, expected), (given, expected))


class Options(unittest.TestCase):
    def test_max_tokens_a_system_message_and_an_instruction(self):
        self.assertEqual(math_agent.options([]), (1024, None, None))
        self.assertEqual(math_agent.options(["--system", r"Put it in \boxed{}.", "--max-tokens", "8"]),
                         (8, r"Put it in \boxed{}.", None))
        self.assertEqual(math_agent.options(["--instruction", "Box it."]), (1024, None, "Box it."))
        for bad in (["--max-tokens"], ["--max-tokens", "x"], ["--system", ""], ["--instruction", ""], ["--tokens", "8"],
                    ["--max-tokens", "8", "--max-tokens", "9"]):
            with self.assertRaises(SystemExit, msg=bad):
                math_agent.options(bad)


class Messages(unittest.TestCase):
    """What one episode sends: the system message where given, the instruction after the problem on its own line."""

    def sent(self, **given):
        requests = []

        class Fake:
            def post(self, path, body):
                requests.append(body)
                return {"choices": [{"message": {"content": r"\boxed{2}"}}], "usage": {"completion_tokens": 3}}
        rollout = {"rollout_id": "r", "attempt": {"attempt_id": "a"}, "input": {"question": "1+1?", "answer": 2}}
        math_agent.player(8, **given)(Fake(), Fake(), rollout)
        return requests[0]["messages"]

    def test_the_problem_alone_or_with_a_system_message_or_an_instruction(self):
        self.assertEqual(self.sent(), [{"role": "user", "content": "1+1?"}])
        self.assertEqual(self.sent(system="S"), [{"role": "system", "content": "S"}, {"role": "user", "content": "1+1?"}])
        self.assertEqual(self.sent(instruction="Box it."), [{"role": "user", "content": "1+1?\nBox it."}])


if __name__ == "__main__":
    unittest.main()
