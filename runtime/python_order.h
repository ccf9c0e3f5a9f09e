/*
 * python_order.h: the order in which Python sorts file names, which is
 * the order torchvision's ImageFolder numbers classes and takes files in
 * (sorted(os.scandir(...)), sorted(os.walk(...))).
 *
 * Python holds a name os.listdir returned as text decoded from UTF-8, each
 * byte that is no part of a valid character taken as the code point
 * U+DC80 + (byte - 0x80) ("surrogateescape"), and compares names code point
 * by code point. For valid UTF-8 that is the bytes' order (strcmp's); it
 * differs where such a stray byte meets a character from U+0080 to U+D7FF
 * (a Latin-1 name beside a UTF-8 one: "\x80x" sorts after "é" in Python,
 * before it by bytes), so the classes of such a folder would be numbered
 * otherwise than PyTorch numbers them.
 */
#ifndef DDPRT_PYTHON_ORDER_H
#define DDPRT_PYTHON_ORDER_H

#include <stddef.h>

/* <0, 0 or >0 as Python orders the names A (A_LEN bytes) and B (B_LEN). */
int ddp_python_order(const char *a, size_t a_len, const char *b, size_t b_len);

#endif
