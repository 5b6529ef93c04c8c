#!/usr/bin/env python3
"""Fails unless the line `KEY N` of stdin has N <= BOUND.

Usage: ... | at_most.py KEY BOUND
"""
import sys


def main():
    key, bound = sys.argv[1], int(sys.argv[2])
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            value = int(parts[1])
            print(f"{key} {value} (at most {bound})")
            sys.exit(0 if value <= bound else 1)
    print(f"no '{key}' line")
    sys.exit(1)


if __name__ == "__main__":
    main()
