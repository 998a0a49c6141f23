"""The ``ictrepro_*`` lm-eval tasks: one YAML per benchmark and group, and ``utils.py``
(their helpers). Installed as the package ``ictrepro.tasks`` (package data); from a
checkout, ``lm_eval --include_path tasks/`` reads this folder."""
