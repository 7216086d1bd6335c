from django.urls import path
from djust_site.views import CounterView
urlpatterns = [path("", CounterView.as_view())]
