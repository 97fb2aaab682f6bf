/*
 * omp_api.h -- the OpenMP API routines the preload libraries call or answer (libgomp and libomp
 * export them under the same names).
 */
#ifndef CILKVIEW_OMP_API_H
#define CILKVIEW_OMP_API_H

int omp_get_num_threads(void);
int omp_get_thread_num(void);
int omp_in_final(void);
int omp_get_max_active_levels(void);
int omp_get_max_threads(void);
int omp_get_num_procs(void);

#endif
