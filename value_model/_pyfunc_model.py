"""MLflow models-from-code entry: logged as the ``python_model`` file of every Harvest model."""

import mlflow.models

from value_model.pyfunc import HarvestValueModel

mlflow.models.set_model(HarvestValueModel())
