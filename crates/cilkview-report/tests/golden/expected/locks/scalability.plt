# cilkview-rs: `gnuplot scalability.plt` (from any folder) draws scalability.png beside it
here = ARG0; i = strlen(here)
while (i > 0 && here[i:i] ne '/') { i = i - 1 }
if (i > 0) { cd here[1:i] }
set encoding utf8
set terminal pngcairo size 960,620 noenhanced
set output 'scalability.png'
set title 'locks_known: parallelism 7.87, burdened parallelism 7.83'
set xlabel 'Cores (P)'
set ylabel 'Speedup T(1)/T(P)'
set key top left
set grid
set xrange [0.8:32.2]
set yrange [0:5.814]
plot 'scalability.dat' index 0 using 1:4:5 with filledcurves lc rgb '#bcd6ee' title 'Estimated speedup range', \
     'scalability.dat' index 0 using 1:2 with lines lw 2 lc rgb '#444444' title 'Work law: speedup ≤ P', \
     'scalability.dat' index 0 using 1:3 with lines lw 2 lc rgb '#d62728' title 'Span law: speedup ≤ parallelism (7.87)', \
     'scalability.dat' index 0 using 1:4 with lines lw 2 lc rgb '#1f77b4' title 'Burdened speedup (lower bound)'
