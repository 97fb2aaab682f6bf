/*
 * coarse_matmul.c -- a coarse floating-point program for scripts/bench-native.sh: each round
 * spawns 8 chunks, each a 160 x 160 double matrix multiply (few marks, ~4 M flops per chunk).
 * Usage: coarse_matmul [rounds]   (default 32)
 */
#include <stdio.h>
#include <stdlib.h>

#include "cilkview.h"

#define N 160
#define CHUNKS 8

static double a[CHUNKS][N][N], b[N][N], c[CHUNKS][N][N];

__attribute__((noinline)) static void chunk(int k)
{
    cv_function();
    for (int i = 0; i < N; i++)
        for (int p = 0; p < N; p++) {
            double x = a[k][i][p];
            for (int j = 0; j < N; j++)
                c[k][i][j] += x * b[p][j];
        }
}

__attribute__((noinline)) static void round_of_chunks(void)
{
    cv_function();
    for (int k = 0; k < CHUNKS; k++)
        cv_spawn(chunk(k));
    cv_sync();
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 32;
    for (int k = 0; k < CHUNKS; k++)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                a[k][i][j] = (double)((i * 7 + j * 3 + k) % 10) / 10.0;
                b[i][j] = (double)((i + j) % 5) / 5.0;
            }
    for (int r = 0; r < rounds; r++)
        round_of_chunks();
    double s = 0;
    for (int k = 0; k < CHUNKS; k++)
        s += c[k][N / 2][N / 3];
    printf("%.3f\n", s);
    return 0;
}
