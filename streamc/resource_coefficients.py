"""The resource models' fitted coefficients: family -> kernel -> "lut"/"ff" -> feature -> weight.

Written by benchmarks/calibrate_resources.py (also to benchmarks/calibration/fit.json) from the
training part of the stored Yosys 0.70 calibration designs; do not edit by hand.
"""

COEFFICIENTS: dict[str, dict[str, dict[str, dict[str, float]]]] = {
    "ice40": {
        "mvau": {
            "lut": {
                "control": 21.5015,
                "soft_multiply": 0.0063,
                "soft_multiply_wide": 1.5081,
                "soft_multiply_signed": 1.2138,
                "lut_multiply": 1.491,
                "multiply_direct": 1.8085,
                "hard_multiply_signed": 0.1419,
                "binary_operand": 1.4419,
                "popcount": 0.5377,
                "popcount_from_offset": 0.5829,
                "adders": 0.648,
                "binary_adders": 0.3568,
                "fixed_binary_adders": 0.7174,
                "binary_lanes": 0.0,
                "accumulator_select": 0.9683,
                "accumulator_start": 0.4707,
                "input_select": 0.6859,
                "buffer_banks": 0.0,
                "thresholds": 0.0688,
                "count_full_adders": 1.6087,
                "requant": 1.894,
                "requant_carry": 1.248,
                "logic_memory": 1.9191,
                "requant_rom": 1.3138,
                "rom_muxes": 0.2536,
                "counters": 1.6023,
                "bram_read": 0.9439,
                "bram_read_masked": 0.2972,
                "bram_ram_read": 0.5937,
                "bram_read_mux": 0.8964
            },
            "ff": {
                "registers": 0.9776,
                "bram_ram_read": 2.1328,
                "bram_ram_wide": 0.0,
                "dsp_products": 0.9598,
                "rq_dsp_products": 1.1873,
                "memory_registers": 0.9925
            }
        },
        "lut": {
            "lut": {
                "control": 1.9898,
                "logic_memory": 1.1277,
                "rom_muxes": 0.6174,
                "folds": 1.5476,
                "bram_read_mux": 0.9802
            },
            "ff": {
                "control": 0.999,
                "memory_registers": 0.9924,
                "folds": 1.2017
            }
        },
        "window": {
            "lut": {
                "control": 1.4636,
                "counters": 1.7828,
                "positions": 2.3126,
                "ring_steps": 0.6626,
                "ring_wraps": 2.1021,
                "padded_positions": 2.7624,
                "read_address": 0.0,
                "compares": 0.5292,
                "payload": 0.9049,
                "logic_memory": 0.0,
                "lutram_read_mux": 0.0,
                "bram_read_mux": 14.0431,
                "write_delay": 0.0
            },
            "ff": {
                "registers": 0.8917,
                "memory_registers": 0.0,
                "payload": 0.6256,
                "write_delay": 1.4656
            }
        },
        "pool": {
            "lut": {
                "control": 3.9359,
                "compare": 0.8786,
                "compare_logic": 0.0,
                "or_lanes": 0.9739,
                "select": 0.7767,
                "counters": 1.0421,
                "count_wrap": 0.5057
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
                "shallow": 5.1431,
                "shallow_pointers": 0.8424,
                "shallow_words": 2.0364,
                "shallow_read_mux": 0.8511,
                "shallow_wide_level": 0.3104,
                "deep": 0.0,
                "deep_pointers": 1.9441,
                "bram_width": 1.0309,
                "lutram": 0.0,
                "lutram_banked": 0.0,
                "lutram_read_mux": 0.0,
                "lutram_write_enables": 0.0,
                "ff_read_mux": 1.4477
            },
            "ff": {
                "storage": 0.9827,
                "pointers": 1.0577,
                "output_register": 0.0,
                "bram_output": 2.0567
            }
        },
        "convert": {
            "lut": {
                "gather": 6.3467,
                "split": 5.6297,
                "split_select": 1.0097,
                "split_count": 1.2721,
                "ring": 5.0543,
                "ring_read": 1.0884,
                "ring_writes": 1.2299,
                "ring_table": 0.2618
            },
            "ff": {
                "registers": 1.0
            }
        },
        "vvau": {
            "lut": {
                "control": 1.2081,
                "multiply": 1.0195,
                "multiply_wide": 0.3694,
                "lut_multiply": 1.2203,
                "adders": 1.9794,
                "logic_memory": 1.2376
            },
            "ff": {
                "control": 12.8544,
                "pipeline": 0.5656,
                "products": 1.4189,
                "partial_sums": 1.009,
                "memory_registers": 1.2764
            }
        },
        "threshold": {
            "lut": {
                "control": 1.5246,
                "compare_rom": 0.0,
                "compare_constant": 0.0,
                "signed_compares": 0.9222,
                "count_full_adders": 1.9877,
                "logic_memory": 1.6264
            },
            "ff": {
                "control": 3.1216,
                "pipeline": 1.0008,
                "memory_registers": 1.0321
            }
        },
        "add": {
            "lut": {
                "control": 0.0,
                "adders": 1.9357,
                "small_adders": 2.7049,
                "shift_adds": 0.3305,
                "negations": 0.0643,
                "adders_after_multiplier": 0.8495
            },
            "ff": {
                "control": 1.0,
                "registers": 1.0
            }
        },
        "concat": {
            "lut": {
                "control": 1.6818,
                "select": 1.0227,
                "counters": 2.3182
            },
            "ff": {
                "control": 0.0,
                "counters": 1.0
            }
        },
        "fork": {
            "lut": {
                "control": 0.7763,
                "outputs": 3.0368,
                "ready": 1.1213
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
                "lut_multiply": 1.6935,
                "multiply_direct": 1.1992,
                "hard_multiply_signed": 0.2152,
                "binary_operand": 0.0,
                "popcount": 1.9296,
                "popcount_from_offset": 1.2745,
                "adders": 0.9743,
                "binary_adders": 0.4195,
                "fixed_binary_adders": 0.8169,
                "binary_lanes": 8.4661,
                "accumulator_select": 0.7313,
                "accumulator_start": 0.6196,
                "input_select": 0.9598,
                "buffer_banks": 5.5212,
                "thresholds": 1.0725,
                "count_full_adders": 1.2017,
                "requant": 3.6834,
                "requant_carry": 4.435,
                "logic_memory": 1.257,
                "requant_rom": 0.5891,
                "rom_muxes": 0.4772,
                "counters": 1.8261,
                "bram_read": 0.0545,
                "bram_read_masked": 0.0,
                "bram_ram_read": 1.0789,
                "bram_read_mux": 0.8907
            },
            "ff": {
                "registers": 0.9605,
                "bram_ram_read": 0.6243,
                "bram_ram_wide": 1.7205,
                "dsp_products": 0.8715,
                "rq_dsp_products": 1.2128,
                "memory_registers": 1.0489
            }
        },
        "lut": {
            "lut": {
                "control": 0.992,
                "logic_memory": 1.1065,
                "rom_muxes": 0.2894,
                "folds": 1.4225,
                "bram_read_mux": 0.0
            },
            "ff": {
                "control": 0.9997,
                "memory_registers": 0.9884,
                "folds": 1.002
            }
        },
        "window": {
            "lut": {
                "control": 0.0,
                "counters": 3.9684,
                "positions": 2.3952,
                "ring_steps": 3.7927,
                "ring_wraps": 1.5615,
                "padded_positions": 0.1461,
                "read_address": 0.0,
                "compares": 0.3278,
                "payload": 1.0826,
                "logic_memory": 0.0,
                "lutram_read_mux": 1.1815,
                "bram_read_mux": 0.0,
                "write_delay": 0.0
            },
            "ff": {
                "registers": 1.0334,
                "memory_registers": 0.9532,
                "payload": 0.5573,
                "write_delay": 1.3887
            }
        },
        "pool": {
            "lut": {
                "control": 0.9904,
                "compare": 1.2792,
                "compare_logic": 1.0892,
                "or_lanes": 1.1901,
                "select": 0.421,
                "counters": 1.6026,
                "count_wrap": 0.8878
            },
            "ff": {
                "control": 0.0,
                "running": 0.9789,
                "shared": 1.1867,
                "counters": 1.4432
            }
        },
        "fifo": {
            "lut": {
                "shallow": 1.6013,
                "shallow_pointers": 1.5497,
                "shallow_words": 0.2989,
                "shallow_read_mux": 3.4713,
                "shallow_wide_level": 9.51,
                "deep": 0.0,
                "deep_pointers": 2.4521,
                "bram_width": 1.2767,
                "lutram": 0.0,
                "lutram_banked": 12.9711,
                "lutram_read_mux": 0.6936,
                "lutram_write_enables": 1.3976,
                "ff_read_mux": 0.0
            },
            "ff": {
                "storage": 0.8744,
                "pointers": 0.9276,
                "output_register": 0.0,
                "bram_output": 2.204
            }
        },
        "convert": {
            "lut": {
                "gather": 3.8609,
                "split": 4.2802,
                "split_select": 1.1098,
                "split_count": 2.5846,
                "ring": 0.0,
                "ring_read": 1.6129,
                "ring_writes": 5.3771,
                "ring_table": 0.2722
            },
            "ff": {
                "registers": 1.0
            }
        },
        "vvau": {
            "lut": {
                "control": 7.5043,
                "multiply": 0.0,
                "multiply_wide": 0.0,
                "lut_multiply": 2.4038,
                "adders": 1.7865,
                "logic_memory": 0.7831
            },
            "ff": {
                "control": 10.2595,
                "pipeline": 0.7413,
                "products": 1.1782,
                "partial_sums": 1.0059,
                "memory_registers": 1.2398
            }
        },
        "threshold": {
            "lut": {
                "control": 0.0,
                "compare_rom": 1.2106,
                "compare_constant": 0.8342,
                "signed_compares": 0.0,
                "count_full_adders": 3.825,
                "logic_memory": 0.7364
            },
            "ff": {
                "control": 3.1216,
                "pipeline": 1.0008,
                "memory_registers": 1.0321
            }
        },
        "add": {
            "lut": {
                "control": 4.1736,
                "adders": 1.145,
                "small_adders": 2.9689,
                "shift_adds": 0.0,
                "negations": 0.0,
                "adders_after_multiplier": 1.0357
            },
            "ff": {
                "control": 1.0,
                "registers": 1.0
            }
        },
        "concat": {
            "lut": {
                "control": 0.0,
                "select": 1.1084,
                "counters": 3.1925
            },
            "ff": {
                "control": 0.0,
                "counters": 1.0
            }
        },
        "fork": {
            "lut": {
                "control": 0.0,
                "outputs": 2.4602,
                "ready": 1.4768
            },
            "ff": {
                "control": 0.0,
                "outputs": 1.0
            }
        }
    }
}
