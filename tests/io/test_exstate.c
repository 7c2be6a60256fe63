/* The exchange state machine: the legal transitions, and that an illegal
 * one aborts, naming the check, in every build type: the check is
 * CG_ASSERT, which NDEBUG does not remove (checked in a child process). */
#include "io/exstate.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

static void test_legal_paths(void **state)
{
    (void)state;
    /* A streamed answer, a held one, a refused-and-resent one, a reject. */
    const cg_ex_state_t paths[][6] = {
        {CG_EX_NEW, CG_EX_CONNECTING, CG_EX_WAITING, CG_EX_STREAMING, CG_EX_DONE, CG_EX_DONE},
        {CG_EX_NEW, CG_EX_CONNECTING, CG_EX_WAITING, CG_EX_HOLDING, CG_EX_STREAMING, CG_EX_DONE},
        {CG_EX_NEW, CG_EX_QUEUED, CG_EX_WAITING, CG_EX_QUEUED, CG_EX_CONNECTING, CG_EX_WAITING},
        {CG_EX_NEW, CG_EX_DONE, CG_EX_DONE, CG_EX_DONE, CG_EX_DONE, CG_EX_DONE},
    };
    for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
        cg_ex_state_t s = paths[p][0];
        for (int i = 1; i < 6 && s != CG_EX_DONE; i++) {
            assert_true(cg_ex_state_legal(s, paths[p][i]));
            cg_ex_state_set(&s, paths[p][i]);
        }
        if (s != CG_EX_DONE)
            cg_ex_state_set(&s, CG_EX_DONE);
        assert_int_equal(s, CG_EX_DONE);
    }
}

static void test_illegal_transitions(void **state)
{
    (void)state;
    assert_false(cg_ex_state_legal(CG_EX_DONE, CG_EX_STREAMING));
    assert_false(cg_ex_state_legal(CG_EX_DONE, CG_EX_DONE));
    assert_false(cg_ex_state_legal(CG_EX_STREAMING, CG_EX_HOLDING));
    assert_false(cg_ex_state_legal(CG_EX_STREAMING, CG_EX_WAITING));
    assert_false(cg_ex_state_legal(CG_EX_NEW, CG_EX_STREAMING));
    assert_false(cg_ex_state_legal(CG_EX_CONNECTING, CG_EX_STREAMING));
    assert_false(cg_ex_state_legal(CG_EX_HOLDING, CG_EX_WAITING));
    assert_false(cg_ex_state_legal(CG_EX_CONNECTING, CG_EX_QUEUED));
    assert_false(cg_ex_state_legal(CG_EX_STREAMING, CG_EX_QUEUED));
    /* Every state but DONE may end. */
    for (int s = CG_EX_NEW; s < CG_EX_DONE; s++)
        assert_true(cg_ex_state_legal((cg_ex_state_t)s, CG_EX_DONE));
}

static void test_illegal_set_aborts(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO); /* the message goes to the parent */
        cg_ex_state_t s = CG_EX_DONE;
        cg_ex_state_set(&s, CG_EX_STREAMING);
        _exit(0);
    }
    close(fds[1]);
    char msg[256] = {0};
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(msg) - 1 && (n = read(fds[0], msg + got, sizeof(msg) - 1 - got)) > 0)
        got += (size_t)n;
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(msg, "invariant failed: cg_ex_state_legal(*s, to)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legal_paths),
        cmocka_unit_test(test_illegal_transitions),
        cmocka_unit_test(test_illegal_set_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
