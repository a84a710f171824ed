"""``python -m value_model train ...`` is ``harvest train ...``; the form ``torchrun`` can start::

    torchrun --nproc_per_node 2 -m value_model train --lake LAKE --register NAME --config configs/qwen3-4b.toml
"""

from trajectory_lake.cli import main

if __name__ == "__main__":
    main()
