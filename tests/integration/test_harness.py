"""The shared exit check of harness.py (DaemonCase, daemon_problems(), Citegate.expect_exit()),
on real citegate processes: what fails a class, what a test may declare, and that a test
class which is not a DaemonCase cannot start citegate at all.

run:  cd tests/integration && CITEGATE_BIN=../../build/citegate python3 -m unittest -v test_harness
"""
import io
import signal
import sys
import unittest

sys.dont_write_bytecode = True
import harness as H  # noqa: E402

# A sanitizer report as LeakSanitizer prints it at exit (the shape sanitizer_reports() reads).
LEAK_REPORT = """
=================================================================
==4242==ERROR: LeakSanitizer: detected memory leaks

Direct leak of 77 byte(s) in 1 object(s) allocated from:
    #0 0x7f0000000000 in malloc
    #1 0x550000000000 in planted_for_the_harness_test src/io/h2.c:1

SUMMARY: AddressSanitizer: 77 byte(s) leaked in 1 allocation(s).
"""


def quiet():
    """A citegate that writes nothing to stderr after start-up but errors, so that text a
    test appends to its stderr file stays at its end."""
    return H.Citegate(env={"CITEGATE_LOG_LEVEL": "error"})


def run_class(case):
    """Runs a TestCase class in a runner of its own; returns (result, output)."""
    out = io.StringIO()
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
    result = unittest.TextTestRunner(stream=out, verbosity=2).run(suite)
    return result, out.getvalue()


class ExitCheck(H.DaemonCase):
    """daemon_problems() on single daemons, each checked by the test itself."""

    def test_clean_sigterm_passes(self):
        cg = quiet().start()
        self.assertEqual(cg.admin("GET", "/healthz")[0], 200)
        self.assertEqual(H.daemon_problems([cg]), [])
        self.assertEqual(cg.exits[0].status, 0)
        self.assertIsNotNone(cg.proc.poll(), "the check stops a citegate that still runs")

    def test_stopped_by_the_test_is_still_checked(self):
        cg = quiet().start()
        self.assertEqual(cg.stop(), 0)
        cg.cleanup()  # the directory (and its stderr.log) is gone: what the check needs was kept
        self.assertEqual(H.daemon_problems([cg]), [])

    def test_died_during_the_class_fails(self):
        cg = quiet().start()
        cg.signal(signal.SIGKILL)
        self.assertEqual(cg.wait(10), -signal.SIGKILL)
        problems = H.daemon_problems([cg])
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("killed by SIGKILL, expected exit status 0", problems[0])

    def test_expected_exit_is_required_exactly(self):
        cg = quiet().expect_exit(-signal.SIGKILL).start()
        cg.signal(signal.SIGKILL)
        cg.wait(10)
        self.assertEqual(H.daemon_problems([cg]), [])
        # declared, but it ended otherwise (SIGTERM, exit 0): that fails too
        cg = quiet().expect_exit(-signal.SIGKILL).start()
        problems = H.daemon_problems([cg])
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("exit status 0, expected killed by SIGKILL", problems[0])

    def test_configuration_error_declared_as_exit_2(self):
        cg = H.Citegate(env={"CITEGATE_WORKERS": "abc"}).expect_exit(2)
        with self.assertRaises(H.StartError):
            cg.start(timeout=5)
        self.assertEqual(H.daemon_problems([cg]), [])
        undeclared = H.Citegate(env={"CITEGATE_WORKERS": "abc"})
        with self.assertRaises(H.StartError):
            undeclared.start(timeout=5)
        problems = H.daemon_problems([undeclared])
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("exit status 2, expected exit status 0", problems[0])
        self.assertIn("CITEGATE_WORKERS", problems[0])  # the stderr tail comes with it

    def test_sanitizer_report_fails_even_with_exit_0(self):
        cg = quiet().start()
        with open(cg.stderr_path, "a") as f:
            f.write(LEAK_REPORT)
        problems = H.daemon_problems([cg])
        self.assertEqual(cg.exits[0].status, 0)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("exit status 0): 1 sanitizer report(s)", problems[0])
        self.assertIn("ERROR: LeakSanitizer: detected memory leaks", problems[0])
        self.assertIn("SUMMARY: AddressSanitizer: 77 byte(s) leaked", problems[0])

    def test_sanitizer_report_fails_an_expected_exit_too(self):
        cg = quiet().expect_exit(-signal.SIGKILL).start()
        with open(cg.stderr_path, "a") as f:
            f.write(LEAK_REPORT)
        cg.signal(signal.SIGKILL)
        cg.wait(10)
        problems = H.daemon_problems([cg])
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("sanitizer report", problems[0])

    def test_each_daemon_is_checked_once(self):
        cg = quiet().start()
        cg.signal(signal.SIGKILL)
        cg.wait(10)
        self.assertEqual(len(H.daemon_problems([cg])), 1)
        self.assertFalse(any(c is cg for c in H._unchecked))
        self.assertEqual(H.daemon_problems([]), [])


class TheClassFixture(H.DaemonCase):
    """DaemonCase itself, on inner test classes run by a runner of their own. Each test
    starts from an empty unchecked list (the inner class checks whatever is unchecked)."""

    def setUp(self):
        self.assertEqual(H._unchecked, [])

    def test_a_daemon_that_died_fails_its_class(self):
        started = []

        class Inner(H.DaemonCase):
            @classmethod
            def setUpClass(cls):
                cls.cg = quiet().start()
                started.append(cls.cg)

            def test_kills_it(self):
                self.cg.signal(signal.SIGKILL)
                self.cg.wait(10)

        result, out = run_class(Inner)
        self.assertEqual(result.testsRun, 1)
        self.assertEqual(result.failures, [])
        self.assertEqual(len(result.errors), 1, out)  # the class's tearDownClass, not the test
        self.assertIn("tearDownClass", str(result.errors[0][0]))
        self.assertIn("killed by SIGKILL, expected exit status 0", result.errors[0][1])
        self.assertEqual(H._unchecked, [])

    def test_a_clean_class_passes_and_stops_its_daemons(self):
        started = []

        class Inner(H.DaemonCase):
            @classmethod
            def setUpClass(cls):
                cls.a = quiet().start()
                cls.b = quiet().start()
                started.extend([cls.a, cls.b])

            def test_answers(self):
                self.assertEqual(self.a.admin("GET", "/healthz")[0], 200)
                self.b.stop()  # stopped by a test: checked the same

        result, out = run_class(Inner)
        self.assertTrue(result.wasSuccessful(), out)
        self.assertTrue(all(cg.proc.poll() == 0 for cg in started), [cg.exits for cg in started])

    def test_a_report_fails_a_class_whose_tearDownClass_does_more(self):
        class Inner(H.DaemonCase):
            @classmethod
            def setUpClass(cls):
                cls.cg = quiet().start()
                cls.torn_down = False

            @classmethod
            def tearDownClass(cls):
                try:
                    super().tearDownClass()
                finally:
                    cls.torn_down = True

            def test_leaks(self):
                with open(self.cg.stderr_path, "a") as f:
                    f.write(LEAK_REPORT)

        result, out = run_class(Inner)
        self.assertEqual(len(result.errors), 1, out)
        self.assertIn("ERROR: LeakSanitizer: detected memory leaks", result.errors[0][1])
        self.assertTrue(Inner.torn_down)

    def test_a_failed_setUpClass_still_checks_what_it_started(self):
        """No tearDownClass after a setUpClass that raised: doClassCleanups checks, and
        stops, the daemon it had started."""
        started = []

        class Inner(H.DaemonCase):
            @classmethod
            def setUpClass(cls):
                started.append(quiet().start())
                raise RuntimeError("set-up failed after the first daemon")

            def test_never_runs(self):
                pass

        result, out = run_class(Inner)
        self.assertEqual(result.testsRun, 0)
        self.assertEqual(len(result.errors), 1, out)
        self.assertIn("set-up failed after the first daemon", result.errors[0][1])
        self.assertEqual(started[0].proc.poll(), 0, "stopped with SIGTERM by the class cleanup")
        self.assertEqual(H._unchecked, [])

    def test_a_plain_TestCase_cannot_start_citegate(self):
        class Plain(unittest.TestCase):
            def test_starts(self):
                H.Citegate().start()

        result, out = run_class(Plain)
        self.assertEqual(len(result.errors), 1, out)
        self.assertIn("is not a harness.DaemonCase", result.errors[0][1])
        self.assertEqual(H._unchecked, [], "refused before anything ran")


if __name__ == "__main__":
    unittest.main()
