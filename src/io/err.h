/*
 * The shell's one error enum. Each row gives the code, the kind label of
 * citegate_upstream_errors_total (NULL: not an upstream failure) and the
 * message a client or the log sees, so the three can never drift apart.
 * Functions return CG_OK (0) or one of these; byte counts travel in
 * out-parameters, never in the same integer.
 */
#ifndef CITEGATE_IO_ERR_H
#define CITEGATE_IO_ERR_H

#define CG_ERRORS(X)                                                                               \
    X(AGAIN, NULL, "more input is needed")                                                         \
    X(CLOSED, NULL, "the peer closed the connection")                                              \
    X(WRITE, NULL, "a socket write failed")                                                        \
    X(CONNECT, "connect", "upstream connect failed")                                               \
    X(CONNECT_TIMEOUT, "timeout", "upstream connect timed out")                                    \
    X(TLS, "tls", "upstream TLS handshake failed")                                                 \
    X(TIMEOUT, "timeout", "upstream did not answer in time")                                       \
    X(RESET, "reset", "upstream closed the connection")                                            \
    X(PROTOCOL, "protocol", "upstream protocol error")                                             \
    X(BUSY, NULL, "every upstream connection is busy and the queue is full")                       \
    X(QUEUE_TIMEOUT, NULL, "waited too long for an upstream connection")

typedef enum cg_err {
    CG_OK = 0,
#define CG_ERR_ENUM(code, label, message) CG_E_##code,
    CG_ERRORS(CG_ERR_ENUM)
#undef CG_ERR_ENUM
        CG_E_COUNT
} cg_err_t;

/* "CONNECT", the label ("connect", or NULL) and the message of an error. */
const char *cg_err_name(cg_err_t e);
const char *cg_err_label(cg_err_t e);
const char *cg_err_message(cg_err_t e);

#endif
