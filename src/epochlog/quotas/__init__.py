"""Client quota decisions (sans-IO): which quota applies, sampled rates, throttle times."""
