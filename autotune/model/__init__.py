"""Problems, spaces and configs, records and shape sets: the values every room shares."""
