"""Distributed input (work in progress in this commit)."""


def distribute_dataset(extended, dataset, options):
  raise NotImplementedError


def distribute_datasets_from_function(extended, dataset_fn, options):
  raise NotImplementedError


def distribute_values_from_function(extended, value_fn):
  raise NotImplementedError


def make_numpy_dataset(extended, numpy_input, session):
  raise NotImplementedError
