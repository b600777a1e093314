"""Bridges to engines lovia runs on; each needs its extra and is imported on its own.

- ``lovia.integrations.celery`` (``pip install 'lovia[celery]'``): runs as Celery tasks.
"""
