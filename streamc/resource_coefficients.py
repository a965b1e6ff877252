"""The resource models' fitted coefficients: family -> kernel -> "lut"/"ff" -> feature -> weight.

Written by benchmarks/calibrate_resources.py (also to benchmarks/calibration/fit.json) from the
training part of the stored Yosys 0.70 calibration designs; do not edit by hand.
"""

COEFFICIENTS: dict[str, dict[str, dict[str, dict[str, float]]]] = {
    "ice40": {
        "mvau": {
            "lut": {
                "control": 27.4644,
                "soft_multiply": 0.3493,
                "soft_multiply_wide": 1.178,
                "soft_multiply_signed": 1.1206,
                "lut_multiply": 1.4873,
                "multiply_direct": 1.7628,
                "hard_multiply_signed": 0.1363,
                "binary_operand": 1.458,
                "popcount": 0.5279,
                "popcount_from_offset": 0.5639,
                "adders": 0.6924,
                "binary_adders": 0.3702,
                "fixed_binary_adders": 0.7218,
                "binary_lanes": 0.0,
                "accumulator_select": 0.8086,
                "accumulator_start": 0.53,
                "input_select": 0.6794,
                "buffer_banks": 0.0,
                "thresholds": 0.0628,
                "count_full_adders": 1.6881,
                "requant": 1.877,
                "requant_carry": 1.1052,
                "logic_memory": 1.9264,
                "requant_rom": 1.0797,
                "rom_muxes": 0.3484,
                "counters": 1.416,
                "bram_read": 0.9462,
                "bram_read_masked": 0.3564,
                "bram_ram_read": 0.5418,
                "bram_read_mux": 0.9125
            },
            "ff": {
                "registers": 0.9773,
                "bram_ram_read": 2.1551,
                "bram_ram_wide": 0.0,
                "dsp_products": 0.9546,
                "rq_dsp_products": 1.1831,
                "memory_registers": 0.9918
            }
        },
        "lut": {
            "lut": {
                "control": 1.9926,
                "logic_memory": 1.1229,
                "rom_muxes": 0.6172,
                "folds": 1.5316,
                "bram_read_mux": 0.9593
            },
            "ff": {
                "control": 0.9986,
                "memory_registers": 0.9849,
                "folds": 1.2609
            }
        },
        "window": {
            "lut": {
                "control": 0.1655,
                "counters": 1.2182,
                "positions": 2.2442,
                "ring_steps": 0.436,
                "ring_wraps": 2.1834,
                "padded_positions": 2.8652,
                "read_address": 0.6368,
                "compares": 0.5891,
                "payload": 0.2378,
                "logic_memory": 0.0,
                "lutram_read_mux": 0.0,
                "bram_read_mux": 15.8068,
                "write_delay": 0.7218
            },
            "ff": {
                "registers": 0.8515,
                "memory_registers": 0.0,
                "payload": 0.3454,
                "write_delay": 1.7675
            }
        },
        "pool": {
            "lut": {
                "control": 4.2848,
                "compare": 0.8709,
                "compare_logic": 0.0,
                "or_lanes": 0.9417,
                "select": 0.7495,
                "counters": 1.0307,
                "count_wrap": 0.4643
            },
            "ff": {
                "control": 1.0,
                "running": 1.0,
                "shared": 1.0,
                "counters": 1.0
            }
        },
        "fifo": {
            "lut": {
                "shallow": 5.9355,
                "shallow_pointers": 0.7175,
                "shallow_words": 1.8796,
                "shallow_read_mux": 0.8546,
                "shallow_wide_level": 1.9248,
                "deep": 0.0,
                "deep_pointers": 1.9315,
                "bram_width": 1.0396,
                "lutram": 0.0,
                "lutram_banked": 0.0,
                "lutram_read_mux": 0.0,
                "lutram_write_enables": 0.0,
                "ff_read_mux": 1.3857
            },
            "ff": {
                "storage": 0.976,
                "pointers": 1.062,
                "output_register": 0.0,
                "bram_output": 2.0592
            }
        },
        "convert": {
            "lut": {
                "gather": 6.4615,
                "split": 5.6257,
                "split_select": 1.0074,
                "split_count": 1.2752,
                "ring": 5.9267,
                "ring_read": 1.0625,
                "ring_writes": 0.8671,
                "ring_table": 0.2917
            },
            "ff": {
                "registers": 1.0
            }
        },
        "vvau": {
            "lut": {
                "control": 3.009,
                "multiply": 1.4812,
                "multiply_wide": 0.0904,
                "lut_multiply": 1.4352,
                "adders": 1.9004,
                "logic_memory": 1.0948
            },
            "ff": {
                "control": 5.4831,
                "pipeline": 1.0799,
                "products": 0.6934,
                "partial_sums": 0.9989,
                "memory_registers": 1.2222
            }
        },
        "threshold": {
            "lut": {
                "control": 1.9927,
                "compare_rom": 0.0,
                "compare_constant": 0.0,
                "signed_compares": 0.8564,
                "count_full_adders": 2.0484,
                "logic_memory": 1.8495
            },
            "ff": {
                "control": 4.6509,
                "pipeline": 0.9837,
                "memory_registers": 1.0634
            }
        },
        "add": {
            "lut": {
                "control": 3.3383,
                "adders": 1.1199,
                "small_adders": 2.1166,
                "shift_adds": 0.8638,
                "negations": 0.7609,
                "adders_after_multiplier": 0.0586
            },
            "ff": {
                "control": 1.0,
                "registers": 1.0
            }
        },
        "concat": {
            "lut": {
                "control": 1.7983,
                "select": 1.0175,
                "counters": 2.287
            },
            "ff": {
                "control": 0.0,
                "counters": 1.0
            }
        },
        "fork": {
            "lut": {
                "control": 0.6543,
                "outputs": 3.2677,
                "ready": 0.7901
            },
            "ff": {
                "control": 0.0,
                "outputs": 1.0
            }
        }
    },
    "ecp5": {
        "mvau": {
            "lut": {
                "control": 0.0,
                "soft_multiply": 0.0,
                "soft_multiply_wide": 0.0,
                "soft_multiply_signed": 0.0,
                "lut_multiply": 1.7358,
                "multiply_direct": 1.2063,
                "hard_multiply_signed": 0.2124,
                "binary_operand": 0.0,
                "popcount": 1.9177,
                "popcount_from_offset": 1.309,
                "adders": 0.8558,
                "binary_adders": 0.2582,
                "fixed_binary_adders": 0.7824,
                "binary_lanes": 8.7795,
                "accumulator_select": 1.1045,
                "accumulator_start": 0.5187,
                "input_select": 1.1674,
                "buffer_banks": 2.7709,
                "thresholds": 1.0776,
                "count_full_adders": 0.7138,
                "requant": 3.3638,
                "requant_carry": 2.6948,
                "logic_memory": 1.244,
                "requant_rom": 0.4396,
                "rom_muxes": 0.8766,
                "counters": 1.8695,
                "bram_read": 0.0577,
                "bram_read_masked": 0.0,
                "bram_ram_read": 0.9466,
                "bram_read_mux": 0.8892
            },
            "ff": {
                "registers": 0.9478,
                "bram_ram_read": 0.514,
                "bram_ram_wide": 1.8504,
                "dsp_products": 0.8782,
                "rq_dsp_products": 1.1677,
                "memory_registers": 1.0634
            }
        },
        "lut": {
            "lut": {
                "control": 0.9945,
                "logic_memory": 1.0878,
                "rom_muxes": 0.2927,
                "folds": 1.475,
                "bram_read_mux": 0.0
            },
            "ff": {
                "control": 0.9998,
                "memory_registers": 0.9896,
                "folds": 1.0018
            }
        },
        "window": {
            "lut": {
                "control": 16.8478,
                "counters": 3.4522,
                "positions": 2.3235,
                "ring_steps": 3.388,
                "ring_wraps": 1.6903,
                "padded_positions": 0.4412,
                "read_address": 0.0,
                "compares": 0.1113,
                "payload": 1.0439,
                "logic_memory": 0.0,
                "lutram_read_mux": 1.1729,
                "bram_read_mux": 0.0,
                "write_delay": 0.1757
            },
            "ff": {
                "registers": 1.0285,
                "memory_registers": 0.9601,
                "payload": 0.3678,
                "write_delay": 1.5433
            }
        },
        "pool": {
            "lut": {
                "control": 1.6559,
                "compare": 1.2659,
                "compare_logic": 1.0451,
                "or_lanes": 1.0936,
                "select": 0.4589,
                "counters": 1.604,
                "count_wrap": 0.7882
            },
            "ff": {
                "control": 0.0,
                "running": 0.985,
                "shared": 1.1943,
                "counters": 1.3629
            }
        },
        "fifo": {
            "lut": {
                "shallow": 1.5755,
                "shallow_pointers": 1.5809,
                "shallow_words": 0.2455,
                "shallow_read_mux": 3.5049,
                "shallow_wide_level": 9.6516,
                "deep": 0.0,
                "deep_pointers": 2.3798,
                "bram_width": 1.3331,
                "lutram": 0.0,
                "lutram_banked": 8.4289,
                "lutram_read_mux": 1.0464,
                "lutram_write_enables": 1.1565,
                "ff_read_mux": 0.0
            },
            "ff": {
                "storage": 0.88,
                "pointers": 0.9036,
                "output_register": 0.0,
                "bram_output": 2.2353
            }
        },
        "convert": {
            "lut": {
                "gather": 3.8873,
                "split": 4.2744,
                "split_select": 1.1192,
                "split_count": 2.5867,
                "ring": 0.0,
                "ring_read": 1.6036,
                "ring_writes": 6.787,
                "ring_table": 0.0689
            },
            "ff": {
                "registers": 1.0
            }
        },
        "vvau": {
            "lut": {
                "control": 7.1646,
                "multiply": 0.8573,
                "multiply_wide": 0.0,
                "lut_multiply": 2.358,
                "adders": 1.7961,
                "logic_memory": 0.8124
            },
            "ff": {
                "control": 4.8527,
                "pipeline": 1.0919,
                "products": 0.6994,
                "partial_sums": 1.0003,
                "memory_registers": 1.2557
            }
        },
        "threshold": {
            "lut": {
                "control": 0.0,
                "compare_rom": 1.2637,
                "compare_constant": 0.8343,
                "signed_compares": 0.0,
                "count_full_adders": 3.8841,
                "logic_memory": 0.7234
            },
            "ff": {
                "control": 4.6509,
                "pipeline": 0.9837,
                "memory_registers": 1.0634
            }
        },
        "add": {
            "lut": {
                "control": 3.9257,
                "adders": 1.1808,
                "small_adders": 3.0133,
                "shift_adds": 0.0,
                "negations": 0.0,
                "adders_after_multiplier": 1.0411
            },
            "ff": {
                "control": 1.0,
                "registers": 1.0
            }
        },
        "concat": {
            "lut": {
                "control": 0.0,
                "select": 1.0839,
                "counters": 3.1803
            },
            "ff": {
                "control": 0.0,
                "counters": 1.0
            }
        },
        "fork": {
            "lut": {
                "control": 0.0,
                "outputs": 2.464,
                "ready": 1.5111
            },
            "ff": {
                "control": 0.0,
                "outputs": 1.0
            }
        }
    }
}
