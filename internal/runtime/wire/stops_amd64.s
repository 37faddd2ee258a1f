//go:build amd64 && !purego

#include "textflag.h"

// STOPS sets in out 0xff for each byte of x that is a quote (Y1), a
// backslash (Y2) or a control byte (its minimum with 0x1f, Y3, is itself),
// 0 for the others; t1 and t2 are scratch.
#define STOPS(x, out, t1, t2) \
	VPCMPEQB	Y1, x, out; \
	VPCMPEQB	Y2, x, t1; \
	VPMINUB	Y3, x, t2; \
	VPCMPEQB	x, t2, t2; \
	VPOR	out, t1, out; \
	VPOR	out, t2, out

// func stopBlocksAVX2(b []byte) int
//
// Returns the index of the first byte of b that ends a run of plain JSON
// string content ('"', '\\' or a byte below 0x20) when it lies in the
// whole 32-byte blocks of b, else the length of those blocks
// (len(b) &^ 31). Two blocks are tested per iteration: each byte is
// compared with the quote and the backslash, and with its minimum with
// 0x1f (equal only for a control byte). The constants are moved with the
// VEX-encoded VMOVQ: a legacy SSE MOVQ here cost about 400 ns per call
// (the SSE/AVX transition) on this project's bench machine.
TEXT ·stopBlocksAVX2(SB), NOSPLIT, $0-32
	MOVQ	b_base+0(FP), SI
	MOVQ	b_len+8(FP), CX
	MOVQ	SI, DI
	MOVL	$0x22, AX
	VMOVQ	AX, X1
	VPBROADCASTB	X1, Y1
	MOVL	$0x5c, AX
	VMOVQ	AX, X2
	VPBROADCASTB	X2, Y2
	MOVL	$0x1f, AX
	VMOVQ	AX, X3
	VPBROADCASTB	X3, Y3
	CMPQ	CX, $64
	JB	block

pair:
	VMOVDQU	(SI), Y4
	VMOVDQU	32(SI), Y5
	STOPS(Y4, Y6, Y7, Y8)
	STOPS(Y5, Y7, Y8, Y9)
	VPOR	Y6, Y7, Y8
	VPTEST	Y8, Y8
	JNZ	pairfound
	ADDQ	$64, SI
	SUBQ	$64, CX
	CMPQ	CX, $64
	JAE	pair

block:
	CMPQ	CX, $32
	JB	none
	VMOVDQU	(SI), Y4
	STOPS(Y4, Y6, Y7, Y8)
	VPMOVMSKB	Y6, AX
	TESTQ	AX, AX
	JNZ	found
	ADDQ	$32, SI

none:
	SUBQ	DI, SI
	MOVQ	SI, ret+24(FP)
	VZEROUPPER
	RET

pairfound:
	VPMOVMSKB	Y6, AX
	VPMOVMSKB	Y7, DX
	SHLQ	$32, DX
	ORQ	DX, AX

found:
	BSFQ	AX, AX
	ADDQ	AX, SI
	SUBQ	DI, SI
	MOVQ	SI, ret+24(FP)
	VZEROUPPER
	RET
